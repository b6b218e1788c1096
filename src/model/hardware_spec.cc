// Hardware specs: one device and its links. Every group of numbers carries its "source" (a
// datasheet or paper); "confidence": "low" marks figures that no primary source confirms.
#include <unistd.h>

#include "model/strict_json.h"
#include "sol/error.h"
#include "sol/model.h"
#include "sol/roofline.h"

namespace sol {

namespace {
using model_json::Fields;
constexpr double kTera = 1e12, kGiga = 1e9, kMicro = 1e-6;

void read_link(Fields& f, double& bandwidth, double& latency_s) {
  bandwidth = f.number("bandwidth_gb_s") * kGiga;
  latency_s = f.number("latency_us") * kMicro;
  f.finish();
}
}  // namespace

HardwareSpec parse_hardware_spec(const std::string& text, const std::string& origin) {
  nlohmann::json doc = model_json::parse_document(text, origin);
  Fields f(doc, origin);
  HardwareSpec hw;
  hw.name = f.text("name");
  f.text_or("description", "");
  hw.confidence = f.text("confidence");
  if (hw.confidence != "high" && hw.confidence != "low") f.fail_key("confidence", "\"high\" or \"low\"");

  Fields flops = f.object("flops");
  hw.flops_bf16 = flops.number("bf16_tflops") * kTera;
  hw.flops_fp8 = flops.number("fp8_tflops") * kTera;
  hw.flops_f32 = flops.number("f32_tflops") * kTera;
  hw.source += "flops: " + flops.text("source");
  flops.finish();

  Fields memory = f.object("memory");
  hw.memory_bytes = memory.number("capacity_gb", 1e-9) * kGiga;
  hw.memory_bandwidth = memory.number("bandwidth_gb_s", 1e-9) * kGiga;
  hw.source += "; memory: " + memory.text("source");
  memory.finish();

  Fields up = f.object("scale_up");
  hw.scale_up_size = static_cast<int>(up.integer("devices"));
  hw.source += "; scale_up: " + up.text("source");
  read_link(up, hw.scale_up_bandwidth, hw.scale_up_latency_s);

  Fields out = f.object("scale_out");
  hw.source += "; scale_out: " + out.text("source");
  read_link(out, hw.scale_out_bandwidth, hw.scale_out_latency_s);
  f.finish();
  return hw;
}

double HardwareSpec::flops(DType t) const {
  double peak = 0;
  switch (t) {
    case DType::bf16: case DType::f16: peak = flops_bf16; break;
    case DType::f8e4m3: case DType::f8e5m2: peak = flops_fp8; break;
    case DType::f32: peak = flops_f32; break;
    default: break;
  }
  check(peak > 0, "hardware " + name, "no ", dtype_name(t),
        " matrix peak (expected a positive flops figure, got 0); pick another gemm_dtype");
  return peak;
}

HardwareSpec hardware_from_machine(const MachineProfile& machine) {
  HardwareSpec hw;
  hw.name = "this";
  hw.confidence = "high";
  hw.source = "measured by sol hw on " + machine.cpu_model + " at " + machine.measured_at;
  auto rate = [&](Unit u) {
    const Ceiling& c = machine.get(u);
    return c.available ? c.all_threads : 0.0;
  };
  // bf16 GEMMs run on AMX where it exists, else on AVX512-BF16 dot products, else as fp32 FMAs
  // on the widened values (compute_unit_on).
  hw.flops_bf16 = rate(Unit::amx_bf16) > 0 ? rate(Unit::amx_bf16) : rate(compute_unit_on(Unit::dot_bf16, machine));
  hw.flops_f32 = rate(Unit::fma_f32);
  hw.memory_bandwidth = rate(Unit::mem_read);
  hw.memory_bytes = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  check(hw.memory_bandwidth > 0, "hardware this", "the machine profile has no mem_read ceiling");
  return hw;
}

}  // namespace sol
