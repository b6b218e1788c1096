#pragma once
// What this machine is and how fast it can possibly go.
//
// cpu_features(): CPUID + OS support (XCR0, and on Linux the AMX tile-data permission).
// active_isa():   the best path the hardware allows, lowered by SOL_ISA=scalar|avx2|avx512|amx.
// Ceilings:       measured peaks of each unit (FLOP/s) and level of memory (B/s), 1 thread and
//                 all threads; `sol hw` prints them, machine.json caches them.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sol/isa.h"

namespace sol {

std::string_view isa_name(Isa isa);
Isa parse_isa(std::string_view name);  // throws sol::Error

struct CpuFeatures {
  std::string vendor;      // "GenuineIntel", "AuthenticAMD"
  std::string model_name;  // brand string
  int logical_cpus = 0;    // CPUs this process may run on
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_fp16 = false, avx512_vnni = false, avx512_vbmi = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  bool os_avx = false;     // XCR0 enables YMM state
  bool os_avx512 = false;  // XCR0 enables opmask + ZMM state
  bool os_amx = false;     // XCR0 allows XTILECFG/XTILEDATA
  bool amx_permitted = false;  // arch_prctl(ARCH_REQ_XCOMP_PERM) granted
  std::string amx_status;      // human-readable: why AMX is or is not usable
  long l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // per instance as the OS reports them
  Isa best_isa = Isa::scalar;  // the highest level both CPU and OS support
};

const CpuFeatures& cpu_features();  // detected once, thread-safe
Isa active_isa();                   // min(best_isa, SOL_ISA); re-reads SOL_ISA each call
bool isa_at_least(Isa isa);         // active_isa() >= isa
// Asks Linux for AMX tile data once per process; true when AMX can be used.
bool enable_amx();

// ---- ceilings ---------------------------------------------------------------------------

// One measurable ceiling. Compute units are in FLOP/s (int8: OP/s), memory levels in B/s
// (copy counts bytes read + bytes written), the clock in Hz.
enum class Unit {
  fma_f32,    // fp32 FMA on the widest vectors the CPU has (AVX-512, else AVX2)
  dot_bf16,   // AVX512-BF16 vdpbf16ps
  dot_s8,     // AVX512-VNNI vpdpbusd (u8 x s8 -> s32), in OP/s
  amx_bf16,   // AMX TDPBF16PS
  amx_int8,   // AMX TDPBSSD
  mem_read,   // DRAM read, arrays far larger than the LLC
  mem_copy,   // DRAM copy (read + write bytes)
  mem_triad,  // DRAM a = b + s*c (3 streams)
  l2_read,    // L2-resident read
  clock,      // core clock from a dependent integer chain
  mem_write,  // DRAM write (non-temporal stores)
  mem_update, // DRAM in-place update (each line read, then written back from the cache)
  mma_fp8,    // a GPU's dense fp8 e4m3 tensor-core peak (wgmma); no CPU has one (unit_is_device_only)
};
inline constexpr Unit kAllUnits[] = {Unit::fma_f32,  Unit::dot_bf16, Unit::dot_s8,
                                     Unit::amx_bf16, Unit::amx_int8, Unit::mma_fp8, Unit::mem_read,
                                     Unit::mem_copy, Unit::mem_update, Unit::mem_write, Unit::mem_triad,
                                     Unit::l2_read, Unit::clock};
std::string_view unit_name(Unit u);   // "fma_f32", ...
std::string_view unit_label(Unit u);  // "GFLOP/s", "GB/s", "GHz" (display scale)
double unit_display_scale(Unit u);    // divide a raw value by this for display (1e9)
bool unit_is_memory(Unit u);
Unit parse_unit(std::string_view name);
// A unit only a GPU has (mma_fp8): a CPU profile holds it as unavailable with
// device_only_ceiling's note, and a profile cached before the unit existed reads as if it held
// that entry (the measurement could give nothing else), so it is not measured again.
bool unit_is_device_only(Unit u);

struct Ceiling {
  Unit unit{};
  bool available = false;    // false: the unit does not exist or may not be used here
  std::string note;          // why unavailable, or how it was measured
  double one_thread = 0;     // raw units per second
  double all_threads = 0;
  int threads = 0;           // thread count of all_threads
};

// The CPU profile's entry for a device-only unit: unavailable, with the reason.
Ceiling device_only_ceiling(Unit u);

struct MachineProfile {
  std::string cpu_model;
  int cores = 0;
  std::string measured_at;  // ISO-8601 UTC
  double measure_seconds = 0;
  std::vector<Ceiling> ceilings;  // one per Unit, in kAllUnits order

  const Ceiling& get(Unit u) const;  // throws sol::Error if missing
  // The ceiling that applies to `threads` threads: one_thread for 1, all_threads for the
  // full count, linear interpolation between the two otherwise.
  double value(Unit u, int threads) const;
  std::string to_json() const;
  static MachineProfile from_json(const std::string& text);  // throws sol::Error
};

// Measures one ceiling now at `threads` threads. The rate is in all_threads (one_thread is
// filled too when threads == 1). `seconds` bounds the time spent (short runs for pairing).
Ceiling measure_ceiling(Unit u, int threads, double seconds = 0.25);
// Measures every ceiling (one thread and all threads); calls progress(unit) before each.
MachineProfile measure_machine(const std::function<void(Unit)>& progress = {});
// $XDG_CACHE_HOME/sol/machine.json (or ~/.cache/sol/...). Entries are keyed by CPU model and
// core count; a cache for another machine is ignored.
std::string machine_cache_path();
std::optional<MachineProfile> load_cached_machine();
void save_cached_machine(const MachineProfile& p);
MachineProfile load_or_measure_machine(bool remeasure,
                                       const std::function<void(Unit)>& progress = {});

}  // namespace sol
