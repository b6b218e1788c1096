#pragma once
// Flash attention forward written in the tile DSL (examples/tile/flash_attention.tile is its text
// form): O, LSE = attention(Q, K, V) with Q, K, V, O bf16 [B, H, tokens, 128] and LSE f32
// [B, H, Sq], no mask, scale 1/sqrt(128).
#include "sol/tile.h"

namespace sol::tile {
Program dsl_flash_attention_bf16();
}
