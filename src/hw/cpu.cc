// CPU feature detection: what the silicon has (CPUID), what the OS saves and restores (XCR0),
// and, for AMX, whether Linux lets this process use tile data at all.
#include <cpuid.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "sol/hw.h"

namespace sol {

namespace {

struct CpuidRegs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(uint32_t leaf, uint32_t subleaf = 0) {
  CpuidRegs r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

bool bit(uint64_t word, int index) { return (word >> index) & 1; }

// XGETBV is only legal once the OS has set CR4.OSXSAVE (CPUID.1:ECX bit 27); the caller checks.
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

std::string vendor_string() {
  CpuidRegs r = cpuid(0);
  char text[13] = {};
  std::memcpy(text + 0, &r.ebx, 4);
  std::memcpy(text + 4, &r.edx, 4);
  std::memcpy(text + 8, &r.ecx, 4);
  return text;
}

std::string brand_string() {
  if (cpuid(0x80000000).eax < 0x80000004) return "unknown x86-64";
  char text[49] = {};
  for (uint32_t i = 0; i < 3; ++i) {
    CpuidRegs r = cpuid(0x80000002 + i);
    std::memcpy(text + 16 * i + 0, &r.eax, 4);
    std::memcpy(text + 16 * i + 4, &r.ebx, 4);
    std::memcpy(text + 16 * i + 8, &r.ecx, 4);
    std::memcpy(text + 16 * i + 12, &r.edx, 4);
  }
  std::string s = text;
  size_t first = s.find_first_not_of(' ');
  size_t last = s.find_last_not_of(' ');
  return first == std::string::npos ? "unknown x86-64" : s.substr(first, last - first + 1);
}

int allowed_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

// "48K", "1024K", "32M" as sysfs writes cache sizes.
long parse_size(const std::string& text) {
  size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  char suffix = used < text.size() ? text[used] : '\0';
  if (suffix == 'K') return value << 10;
  if (suffix == 'M') return value << 20;
  if (suffix == 'G') return value << 30;
  return value;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// sysfs first: it reports what this (possibly virtual) CPU's caches are per instance. glibc's
// sysconf on a KVM guest can report the whole host socket's L3 (384 MiB on the Zen 5 hosts here,
// where sysfs says 32 MiB), which would make "larger than the LLC" arrays needlessly huge.
void detect_caches(CpuFeatures& f) {
  for (int index = 0; index < 8; ++index) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::string level = read_line(dir + "level");
    if (level.empty()) break;
    std::string type = read_line(dir + "type");
    long bytes = parse_size(read_line(dir + "size"));
    if (level == "1" && type == "Data") f.l1d_bytes = bytes;
    if (level == "2" && type != "Instruction") f.l2_bytes = bytes;
    if (level == "3" && type != "Instruction") f.l3_bytes = bytes;
  }
  if (f.l1d_bytes <= 0) f.l1d_bytes = std::max(0L, sysconf(_SC_LEVEL1_DCACHE_SIZE));
  if (f.l2_bytes <= 0) f.l2_bytes = std::max(0L, sysconf(_SC_LEVEL2_CACHE_SIZE));
  if (f.l3_bytes <= 0) f.l3_bytes = std::max(0L, sysconf(_SC_LEVEL3_CACHE_SIZE));
}

// Linux (5.16+) hands out the large AMX tile-data state only on request; without the grant the
// first tile instruction raises SIGILL. The request is per process and idempotent.
void request_amx_permission(CpuFeatures& f) {
  if (!(f.amx_tile && f.amx_bf16 && f.amx_int8)) {
    f.amx_status = "not supported by CPU";
    return;
  }
  if (!f.os_amx) {
    f.amx_status = "not enabled by the OS (XCR0 lacks XTILECFG/XTILEDATA)";
    return;
  }
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    int err = errno;
    f.amx_status = "OS refused: errno " + std::to_string(err) + " (" + std::strerror(err) + ")";
    return;
  }
  f.amx_permitted = true;
  f.amx_status = "enabled";
}

// Each level requires everything its translation units are compiled with
// (cmake/SolIsaFlags.cmake): an _avx512.cc file may use AVX512-BF16 and AVX512-VNNI (every CPU
// with the former has the latter), an _amx.cc file all of AMX and AVX512-VBMI (every AMX CPU,
// Sapphire Rapids on, has it; a hypervisor that hides it gets the avx512 level).
Isa best_isa_of(const CpuFeatures& f) {
  bool avx2 = f.os_avx && f.avx2 && f.fma && f.f16c;
  bool avx512 = avx2 && f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq &&
                f.avx512_bf16 && f.avx512_vnni;
  bool amx = avx512 && f.amx_permitted && f.avx512_vbmi;
  return amx ? Isa::amx : avx512 ? Isa::avx512 : avx2 ? Isa::avx2 : Isa::scalar;
}

CpuFeatures detect() {
  CpuFeatures f;
  f.vendor = vendor_string();
  f.model_name = brand_string();
  f.logical_cpus = allowed_cpu_count();
  uint32_t max_leaf = cpuid(0).eax;

  CpuidRegs l1 = cpuid(1);
  f.fma = bit(l1.ecx, 12);
  f.f16c = bit(l1.ecx, 29);
  bool osxsave = bit(l1.ecx, 27);
  uint64_t xcr0 = osxsave ? read_xcr0() : 0;
  // Bits 1-2: SSE and AVX (YMM) state; 5-7: opmask, ZMM0-15 upper halves, ZMM16-31;
  // 17-18: XTILECFG and XTILEDATA.
  f.os_avx = (xcr0 & 0x6) == 0x6;
  f.os_avx512 = f.os_avx && (xcr0 & 0xE0) == 0xE0;
  f.os_amx = (xcr0 & 0x60000) == 0x60000;

  if (max_leaf >= 7) {
    CpuidRegs l7 = cpuid(7, 0);
    f.avx2 = bit(l7.ebx, 5);
    f.avx512f = bit(l7.ebx, 16);
    f.avx512dq = bit(l7.ebx, 17);
    f.avx512bw = bit(l7.ebx, 30);
    f.avx512vl = bit(l7.ebx, 31);
    f.amx_bf16 = bit(l7.edx, 22);
    f.avx512_fp16 = bit(l7.edx, 23);
    f.amx_tile = bit(l7.edx, 24);
    f.amx_int8 = bit(l7.edx, 25);
    f.avx512_vbmi = bit(l7.ecx, 1);
    f.avx512_vnni = bit(l7.ecx, 11);
    if (l7.eax >= 1) f.avx512_bf16 = bit(cpuid(7, 1).eax, 5);
  }
  // The tile state must also be an XSAVE-managed component (leaf 0xD), or the OS cannot
  // context-switch it whatever XCR0 says.
  if (max_leaf >= 0xD) f.os_amx = f.os_amx && (cpuid(0xD, 0).eax & 0x60000) == 0x60000;

  detect_caches(f);
  request_amx_permission(f);
  f.best_isa = best_isa_of(f);
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();  // C++11 magic statics: detected once
  return features;
}

bool enable_amx() { return cpu_features().amx_permitted; }

}  // namespace sol
