// Discovery on a machine without a usable GPU must give a reason, never crash. Each case runs
// in a child process, since discovery happens once per process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "sol/device.h"
#include "sol/error.h"

namespace sol {
namespace {

// cuda_discovery().reason of a fresh process (discovery runs once per process, so a forked
// child would inherit the parent's answer): this test binary re-run on the helper test below,
// with SOL_CUDA_DRIVER set to `driver`.
std::string reason_in_child(const char* driver) {
  const std::string cmd = std::string("SOL_TEST_DISCOVERY_CHILD=1 SOL_CUDA_DRIVER='") + driver +
                          "' /proc/" + std::to_string(::getpid()) +
                          "/exe --gtest_filter=CudaDiscovery.ChildPrintsReason 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "(popen failed)";
  std::string out;
  char buf[512];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << "discovery failed the child:\n" << out;
  const size_t at = out.find("REASON: ");
  return at == std::string::npos ? out : out.substr(at + 8, out.find('\n', at) - at - 8);
}

// Not a test of its own: prints discovery's reason for reason_in_child.
TEST(CudaDiscovery, ChildPrintsReason) {
  if (!std::getenv("SOL_TEST_DISCOVERY_CHILD")) GTEST_SKIP() << "run by the other discovery tests";
  const CudaDiscovery& d = cuda_discovery();
  std::printf("REASON: %s\n", d.devices.empty() ? d.reason.c_str() : "(devices found)");
}

TEST(CudaDiscovery, ThisMachineGivesAReasonOrDevices) {
  const CudaDiscovery& d = cuda_discovery();
  if (!d.devices.empty()) {
    EXPECT_TRUE(d.reason.empty());
    EXPECT_GT(d.devices[0].sm_count, 0);
    return;
  }
  EXPECT_FALSE(d.reason.empty());
  EXPECT_EQ(cuda_device_count(), 0);
  EXPECT_THROW(cuda_device(0), Error);
}

TEST(CudaDiscovery, MissingDriverLibraryIsNamed) {
  if (!cuda_discovery().built_with_cuda) GTEST_SKIP() << cuda_discovery().reason;
  const std::string r = reason_in_child("/nonexistent/libcuda.so.1");
  EXPECT_NE(r.find("cannot load the CUDA driver /nonexistent/libcuda.so.1"), std::string::npos) << r;
}

TEST(CudaDiscovery, StubDriverReportsCuInitError) {
  if (!cuda_discovery().built_with_cuda) GTEST_SKIP() << cuda_discovery().reason;
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (::access(stub, R_OK) != 0) GTEST_SKIP() << "no toolkit stub at " << stub;
  const std::string r = reason_in_child(stub);
  EXPECT_NE(r.find("cuInit failed"), std::string::npos) << r;
}

TEST(CudaDeviceInfo, ArchNamesTheArchitectureSpecificTarget) {
  CudaDeviceInfo h200;
  h200.cc_major = 9;
  h200.cc_minor = 0;
  EXPECT_EQ(h200.arch(), "sm_90a");
  CudaDeviceInfo a100;
  a100.cc_major = 8;
  a100.cc_minor = 0;
  EXPECT_EQ(a100.arch(), "sm_80");
}

}  // namespace
}  // namespace sol
