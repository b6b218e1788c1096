#include "hw/cpu_identity.h"

#include <cpuid.h>

#include <cstdio>

#include "sol/hw.h"

namespace sol {

namespace {

void append_leaf(std::string& out, uint32_t leaf, uint32_t subleaf, uint32_t max_leaf) {
  uint32_t a = 0, b = 0, c = 0, d = 0;
  if (leaf <= max_leaf) __cpuid_count(leaf, subleaf, a, b, c, d);
  // Leaf 1's EBX holds the APIC id and logical CPU count (bits 16-31): not the CPU's identity.
  if (leaf == 1) b &= 0xffffu;
  // Leaf 0x80000008's ECX/EDX count cores: the same CPU in a bigger VM is the same target.
  if (leaf == 0x80000008) c = d = 0;
  char buf[96];
  std::snprintf(buf, sizeof buf, " %x.%x:%08x.%08x.%08x.%08x", leaf, subleaf, a, b, c, d);
  out += buf;
}

uint64_t xcr0() {
  uint32_t a = 0, b = 0, c = 0, d = 0;
  __cpuid(1, a, b, c, d);
  if (!(c & (1u << 27))) return 0;  // no OSXSAVE: xgetbv would fault
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

}  // namespace

const std::string& cpu_identity() {
  static const std::string id = [] {
    const CpuFeatures& f = cpu_features();
    std::string s = f.vendor + " | " + f.model_name + " |";
    const uint32_t max_leaf = __get_cpuid_max(0, nullptr);
    const uint32_t max_ext = __get_cpuid_max(0x80000000, nullptr);
    append_leaf(s, 1, 0, max_leaf);
    append_leaf(s, 7, 0, max_leaf);
    append_leaf(s, 7, 1, max_leaf);
    append_leaf(s, 0xD, 1, max_leaf);
    append_leaf(s, 0x80000001, 0, max_ext);
    append_leaf(s, 0x80000008, 0, max_ext);
    s += " xcr0:" + std::to_string(xcr0());
    return s;
  }();
  return id;
}

}  // namespace sol
