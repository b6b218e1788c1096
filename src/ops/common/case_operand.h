#pragma once
// One operand of a benchmark case on the case's device. The host buffer is where the case fills,
// poisons and compares (the references run on the CPU); on cuda:N a device buffer of the same
// dtype and shape mirrors it and is what the op sees. On the CPU both are the host buffer, so a
// case written once runs on either (the pattern: docs/howto/add-an-op.md, "On a GPU too").
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>

#include "sol/device.h"
#include "sol/tensor.h"

namespace sol {

class CaseOperand {
 public:
  CaseOperand(Device device, DType dtype, std::span<const int64_t> shape) : host_(dtype, shape) {
    if (!device.is_cpu()) mirror_.emplace(device, dtype, shape);
  }
  CaseOperand(Device device, DType dtype, std::initializer_list<int64_t> shape)
      : CaseOperand(device, dtype, std::span<const int64_t>(shape.begin(), shape.size())) {}

  const Buffer& host() const { return host_; }  // fill, poison and compare here
  // What the op is given: the host buffer's view on the CPU, the device buffer's on a GPU.
  const Tensor& tensor() const { return mirror_ ? mirror_->tensor() : host_.tensor(); }
  operator const Tensor&() const { return tensor(); }
  void upload() const {  // host -> device, after filling or poisoning the host buffer
    if (mirror_) transfer(host_, *mirror_);
  }
  void download() const {  // device -> host, before comparing
    if (mirror_) transfer(*mirror_, host_);
  }

 private:
  Buffer host_;
  std::optional<DeviceBuffer> mirror_;
};

}  // namespace sol
