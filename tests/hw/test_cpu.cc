#include <gtest/gtest.h>

#include <string>

#include "hw/env_guard.h"
#include "sol/error.h"
#include "sol/hw.h"

namespace sol {
namespace {

using testing::EnvGuard;

TEST(CpuFeatures, DescribesThisMachine) {
  const CpuFeatures& f = cpu_features();
  EXPECT_FALSE(f.vendor.empty());
  EXPECT_FALSE(f.model_name.empty());
  EXPECT_GE(f.logical_cpus, 1);
  EXPECT_GT(f.l1d_bytes, 0);
  EXPECT_GT(f.l2_bytes, 0);
  EXPECT_FALSE(f.amx_status.empty());
  EXPECT_EQ(&f, &cpu_features()) << "detected once";
}

TEST(CpuFeatures, BestIsaNeedsCpuAndOsSupport) {
  const CpuFeatures& f = cpu_features();
  if (f.best_isa >= Isa::avx2) {
    EXPECT_TRUE(f.avx2 && f.fma && f.os_avx);
  }
  if (f.best_isa >= Isa::avx512) {
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_bf16 &&
                f.os_avx512);
  }
  if (f.best_isa >= Isa::amx) {
    EXPECT_TRUE(f.amx_tile && f.amx_bf16 && f.os_amx);
  }
  if (f.os_avx512) {
    EXPECT_TRUE(f.os_avx);
  }
}

TEST(CpuFeatures, AmxStatusSaysWhy) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(enable_amx(), f.amx_permitted);
  EXPECT_EQ(enable_amx(), enable_amx()) << "asking twice changes nothing";
  if (f.amx_permitted) {
    EXPECT_EQ(f.amx_status, "enabled");
  } else {
    EXPECT_NE(f.amx_status, "enabled");
    EXPECT_LT(f.best_isa, Isa::amx);
  }
  if (!f.amx_tile) {
    EXPECT_EQ(f.amx_status, "not supported by CPU");
  }
}

TEST(CpuIsa, NamesRoundTrip) {
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::amx})
    EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_EQ(isa_name(Isa::avx512), "avx512");
}

TEST(CpuIsa, UnknownNameThrows) {
  try {
    parse_isa("avx-512");
    FAIL() << "expected sol::Error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("avx-512"), std::string::npos) << what;
    EXPECT_NE(what.find("scalar, avx2, avx512 or amx"), std::string::npos) << what;
  }
}

TEST(CpuIsa, UnsetOrEmptySolIsaMeansBest) {
  {
    EnvGuard env("SOL_ISA", nullptr);
    EXPECT_EQ(active_isa(), cpu_features().best_isa);
  }
  EnvGuard env("SOL_ISA", "");
  EXPECT_EQ(active_isa(), cpu_features().best_isa);
}

TEST(CpuIsa, SolIsaLowersTheLevelAndIsReadEachCall) {
  Isa best = cpu_features().best_isa;
  for (Isa wanted : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    EnvGuard env("SOL_ISA", std::string(isa_name(wanted)).c_str());
    Isa expected = wanted < best ? wanted : best;
    EXPECT_EQ(active_isa(), expected) << isa_name(wanted);
    EXPECT_TRUE(isa_at_least(Isa::scalar));
    EXPECT_EQ(isa_at_least(Isa::amx), expected >= Isa::amx);
  }
}

TEST(CpuIsa, SolIsaAboveTheMachineIsClampedToBest) {
  EnvGuard env("SOL_ISA", "amx");
  EXPECT_EQ(active_isa(), cpu_features().best_isa);
}

TEST(CpuIsa, UnknownSolIsaThrowsNamingTheVariable) {
  EnvGuard env("SOL_ISA", "sse9");
  try {
    active_isa();
    FAIL() << "expected sol::Error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("SOL_ISA"), std::string::npos) << what;
    EXPECT_NE(what.find("sse9"), std::string::npos) << what;
    EXPECT_NE(what.find("scalar, avx2, avx512 or amx"), std::string::npos) << what;
  }
  EXPECT_THROW(isa_at_least(Isa::scalar), Error);
}

}  // namespace
}  // namespace sol
