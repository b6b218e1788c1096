#pragma once
#include <string>

namespace sol {

// Text that differs between any two CPUs a -march=native object could differ for: the vendor,
// brand string, family/model/stepping and the raw CPUID feature words (leaves 1, 7.0, 7.1,
// 0xD.1, 0x80000001, 0x80000008) plus XCR0. Part of the CPU JIT's cache key, so an object
// built for one CPU is never served to another that shares the cache directory.
const std::string& cpu_identity();

}  // namespace sol
