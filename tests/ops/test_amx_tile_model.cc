// The scalar model of the AMX tiles must fail where the hardware faults, or the GEMM tests that
// run the AMX kernels on it (gemm_paths.h) could pass with a configuration real tiles reject.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/x86/amx/amx_tile_model.h"
#include "ops/error_message.h"
#include "sol/error.h"

namespace sol::kernels::amx {
namespace {

using testing_errors::message_of;

TEST(AmxTileModel, TileUseWithoutAConfigurationThrows) {
  ModelTiles::release();
  EXPECT_NE(message_of([] { ModelTiles::zero<kC00>(); }).find("without a tile configuration"), std::string::npos);
}

TEST(AmxTileModel, MismatchedDotShapesThrowLikeTheHardwareFaults) {
  ModelTiles::configure(gemm_tile_config(16));
  TileConfig bad = gemm_tile_config(16);
  bad.rows[kB0] = 8;  // A carries 16 K steps per row, B only 8
  ModelTiles::configure(bad);
  const std::string msg = message_of([] { ModelTiles::dp_bf16<kC00, kA0, kB0>(); });
  EXPECT_NE(msg.find("shapes disagree"), std::string::npos) << msg;
  TileConfig too_big = gemm_tile_config();
  too_big.bytes_per_row[kA0] = 128;
  EXPECT_NE(message_of([&] { ModelTiles::configure(too_big); }).find("configured as"), std::string::npos);
  ModelTiles::release();
}

TEST(AmxTileModel, DotProductsFollowTheInstructionDefinitions) {
  ModelTiles::configure(gemm_tile_config(2));  // A 16 x 8 bytes, B 2 rows x 64 bytes
  alignas(64) uint16_t a[16][4] = {}, b[2][32] = {};
  a[3][0] = 0x3F80;  // 1.0 at (row 3, k 0)
  a[3][3] = 0x4000;  // 2.0 at (row 3, k 3)
  b[0][2 * 5] = 0x4040;      // 3.0 at (k 0, column 5)
  b[1][2 * 5 + 1] = 0x4080;  // 4.0 at (k 3, column 5)
  ModelTiles::zero<kC00>();
  ModelTiles::load<kA0>(a, sizeof a[0]);
  ModelTiles::load<kB0>(b, sizeof b[0]);
  ModelTiles::dp_bf16<kC00, kA0, kB0>();
  alignas(64) float c[16][16];
  ModelTiles::store<kC00>(c, sizeof c[0]);
  EXPECT_EQ(c[3][5], 1.0f * 3.0f + 2.0f * 4.0f);
  EXPECT_EQ(c[2][5], 0.0f);

  alignas(64) int8_t sa[16][8] = {}, sb[2][64] = {};
  sa[0][1] = -128;
  sa[0][7] = 127;
  sb[0][4 * 9 + 1] = -128;
  sb[1][4 * 9 + 3] = -1;
  ModelTiles::zero<kC01>();
  ModelTiles::load<kA1>(sa, sizeof sa[0]);
  ModelTiles::load<kB1>(sb, sizeof sb[0]);
  ModelTiles::dp_s8s8<kC01, kA1, kB1>();
  int32_t ci[16][16];
  ModelTiles::store<kC01>(ci, sizeof ci[0]);
  EXPECT_EQ(ci[0][9], (-128) * (-128) + 127 * (-1));
  ModelTiles::zero<kC01>();
  ModelTiles::dp_u8s8<kC01, kA1, kB1>();  // A read as u8: -128 is 128, 127 stays
  ModelTiles::store<kC01>(ci, sizeof ci[0]);
  EXPECT_EQ(ci[0][9], 128 * (-128) + 127 * (-1));
  ModelTiles::release();
}

}  // namespace
}  // namespace sol::kernels::amx
