#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sol/error.h"
#include "sol/tensor.h"

namespace sol {
namespace {

TEST(Tensor, ContiguousStridesAndNumel) {
  float data[24];
  Tensor t(data, DType::f32, {2, 3, 4});
  EXPECT_EQ(t.ndim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_EQ(t.stride(1), 4);
  EXPECT_EQ(t.stride(-1), 1);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.ptr({1, 2, 3}), static_cast<void*>(data + 23));
  EXPECT_EQ(t.shape_string(), "[2, 3, 4]");
  EXPECT_EQ(t.describe(), "[2, 3, 4] f32");
}

TEST(Tensor, SliceKeepsStridesAndBreaksContiguity) {
  uint16_t data[6 * 8];
  Tensor t(data, DType::bf16, {6, 8});
  Tensor rows = t.slice(0, 2, 5);
  EXPECT_EQ(rows.shape(0), 3);
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_EQ(rows.data(), static_cast<void*>(data + 16));
  Tensor cols = t.slice(1, 1, 4);
  EXPECT_EQ(cols.shape(1), 3);
  EXPECT_EQ(cols.stride(0), 8);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.ptr({1, 0}), static_cast<void*>(data + 9));
  EXPECT_EQ(t.slice(1, 3, 3).numel(), 0);
}

TEST(Tensor, SizeOneDimsMayHaveAnyStride) {
  float data[4];
  const int64_t shape[] = {1, 4}, strides[] = {999, 1};
  EXPECT_TRUE(Tensor(data, DType::f32, shape, strides).is_contiguous());
}

TEST(Tensor, SixtyFourBitIndexing) {
  // 2^33 elements never touched: only the index arithmetic is exercised.
  Tensor t(reinterpret_cast<void*>(uintptr_t(1) << 40), DType::i8, {int64_t(1) << 17, int64_t(1) << 16});
  EXPECT_EQ(t.numel(), int64_t(1) << 33);
  int64_t idx[] = {(int64_t(1) << 17) - 1, (int64_t(1) << 16) - 1};
  EXPECT_EQ(t.offset_of(idx), (int64_t(1) << 33) - 1);
}

TEST(Tensor, ReshapeNeedsContiguityAndSameCount) {
  float data[12];
  Tensor t(data, DType::f32, {3, 4});
  EXPECT_EQ(t.reshape({2, 6}).shape(1), 6);
  EXPECT_THROW(t.reshape({5, 2}), Error);
  EXPECT_THROW(t.slice(1, 0, 2).reshape({6}), Error);
}

TEST(Tensor, BadArgumentsThrowWithMessages) {
  float data[4];
  EXPECT_THROW(Tensor(data, DType::f32, {2, -1}), Error);
  EXPECT_THROW(Tensor(data, DType::f32, {1, 1, 1, 1, 1, 1, 1, 1, 1}), Error);
  Tensor t(data, DType::f32, {2, 2});
  EXPECT_THROW(t.shape(2), Error);
  EXPECT_THROW(t.slice(0, 1, 3), Error);
  EXPECT_THROW(t.ptr({2, 0}), Error);
  EXPECT_THROW(t.ptr({0}), Error);
  try {
    t.slice(1, 0, 5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Tensor::slice"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[0, 5)"), std::string::npos) << e.what();
  }
  const int64_t shape[] = {2}, strides[] = {-1};
  EXPECT_THROW(Tensor(data, DType::f32, shape, strides), Error);
}

// A device view must start on a whole element (kernels load whole elements; a misaligned one
// faults the context); the host takes any address, as before.
TEST(Tensor, DeviceViewsStartOnAWholeElement) {
  alignas(8) unsigned char bytes[64] = {};
  const Tensor odd(bytes + 1, DType::bf16, {4});
  EXPECT_NO_THROW(odd.on(Device::cpu()));
  try {
    (void)odd.on(Device::cuda(0));
    ADD_FAILURE() << "a bf16 view at an odd address moved to cuda:0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of 2 bytes"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)Tensor(bytes + 2, DType::f32, {4}).on(Device::cuda(0)), Error);
  EXPECT_THROW((void)Tensor(bytes + 4, DType::i64, {2}).on(Device::cuda(1)), Error);
  EXPECT_EQ(Tensor(bytes + 2, DType::bf16, {4}).on(Device::cuda(0)).device(), Device::cuda(0));
  EXPECT_EQ(Tensor(bytes + 3, DType::f8e4m3, {4}).on(Device::cuda(0)).device_data(), bytes + 3);
}

TEST(Buffer, AlignmentAndMove) {
  Buffer small(DType::f32, {3});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
  Buffer big(size_t(3) << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % 4096, 0u);
  void* p = big.data();
  Buffer moved = std::move(big);
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(big.data(), nullptr);
  EXPECT_EQ(moved.tensor().nbytes(), int64_t(3) << 20);
  Buffer empty(DType::bf16, {0, 5});
  EXPECT_EQ(empty.tensor().numel(), 0);
  EXPECT_THROW(Buffer(DType::f32, {int64_t(1) << 40, int64_t(1) << 40}), Error);
}

}  // namespace
}  // namespace sol
