#pragma once
// sol::Tensor — a non-owning view: pointer, dtype, shape and strides (in elements), up to 8
// dims, 64-bit indexing everywhere, and the device its memory lives on (cpu unless said).
// sol::Buffer — the owning, aligned host allocation behind it (device memory: sol/device.h).
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <span>
#include <string>

#include "sol/dtype.h"

namespace sol {

inline constexpr int kMaxDims = 8;

enum class DeviceType : uint8_t { cpu, cuda };

// Where a tensor's memory lives: the host, or CUDA device N ("cuda:0").
struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu() { return {}; }
  static constexpr Device cuda(int index) { return {DeviceType::cuda, index}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool operator==(const Device&) const = default;
  std::string name() const;  // "cpu", "cuda:0"
};
std::ostream& operator<<(std::ostream& os, const Device& d);

class Tensor {
 public:
  Tensor() = default;
  // Contiguous row-major view over `data`.
  Tensor(void* data, DType dtype, std::span<const int64_t> shape);
  Tensor(void* data, DType dtype, std::initializer_list<int64_t> shape)
      : Tensor(data, dtype, std::span<const int64_t>(shape.begin(), shape.size())) {}
  // Strided view; strides are in elements and may be any non-negative values.
  Tensor(void* data, DType dtype, std::span<const int64_t> shape, std::span<const int64_t> strides);

  // Host pointer to the first element. Throws sol::Error for a tensor on a device: host code
  // must never dereference device memory, so every CPU op that reaches its data stops here.
  void* data() const {
    if (!device_.is_cpu()) [[unlikely]] throw_not_on_host();
    return data_;
  }
  template <class T> T* data_as() const { return static_cast<T*>(data()); }
  // The address on whichever device holds the memory (device runtimes and kernels).
  void* device_data() const { return data_; }
  template <class T> T* device_data_as() const { return static_cast<T*>(data_); }
  Device device() const { return device_; }
  // The same view, its memory declared to live on `d`. On a device the first element must be
  // aligned to its size (a kernel's load of a misaligned element faults the whole context):
  // sol::Error otherwise.
  Tensor on(Device d) const {
    if (!d.is_cpu() && reinterpret_cast<uintptr_t>(data_) % dtype_size(dtype_) != 0) [[unlikely]]
      throw_misaligned_on(d);
    Tensor t = *this;
    t.device_ = d;
    return t;
  }
  DType dtype() const { return dtype_; }
  int ndim() const { return ndim_; }
  int64_t shape(int d) const { return shape_[axis(d)]; }
  int64_t stride(int d) const { return strides_[axis(d)]; }
  std::span<const int64_t> shape() const { return {shape_.data(), size_t(ndim_)}; }
  std::span<const int64_t> strides() const { return {strides_.data(), size_t(ndim_)}; }
  int64_t numel() const;
  int64_t nbytes() const { return numel() * int64_t(dtype_size(dtype_)); }
  bool empty() const { return numel() == 0; }
  // Dense row-major: elements occupy exactly numel() consecutive slots.
  bool is_contiguous() const;

  // Byte offset / pointer of a multi-index (bounds-checked; throws sol::Error).
  int64_t offset_of(std::span<const int64_t> index) const;
  void* ptr(std::initializer_list<int64_t> index) const;

  // View of [start, stop) along dim d (negative dim counts from the end).
  Tensor slice(int d, int64_t start, int64_t stop) const;
  // Same elements, new shape; only for contiguous tensors.
  Tensor reshape(std::span<const int64_t> shape) const;
  Tensor reshape(std::initializer_list<int64_t> shape) const {
    return reshape(std::span<const int64_t>(shape.begin(), shape.size()));
  }

  // "[4096, 7168] bf16" — for messages and records.
  std::string shape_string() const;
  std::string describe() const;

 private:
  int axis(int d) const;
  [[noreturn]] void throw_not_on_host() const;
  [[noreturn]] void throw_misaligned_on(Device d) const;
  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  int ndim_ = 0;
  std::array<int64_t, kMaxDims> shape_{};
  std::array<int64_t, kMaxDims> strides_{};
  Device device_{};
};

// A tensor's shape ("[4096, 7168]") written only when streamed: the argument to give check(),
// whose arguments are evaluated on every call, also when nothing fails (shape_string() there
// built a string per call: ~0.1-0.3 us of a small op).
struct ShapeText {
  const Tensor& t;
};
inline ShapeText shape_text(const Tensor& t) { return {t}; }
std::ostream& operator<<(std::ostream& os, ShapeText s);
// The same for t.describe() ("[4096, 7168] bf16").
struct DescribeText {
  const Tensor& t;
};
inline DescribeText describe_text(const Tensor& t) { return {t}; }
std::ostream& operator<<(std::ostream& os, DescribeText d);

// Owning allocation, 64-byte aligned; allocations of 2 MiB and more are 4 KiB aligned and
// advised for transparent huge pages (fewer TLB misses on streaming kernels).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);
  Buffer(DType dtype, std::initializer_list<int64_t> shape);
  Buffer(DType dtype, std::span<const int64_t> shape);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Contiguous view with the shape/dtype given at construction.
  const Tensor& tensor() const { return view_; }
  operator const Tensor&() const { return view_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Tensor view_;
};

}  // namespace sol
