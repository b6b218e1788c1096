#pragma once
// How a reduction combines its sources (core: a plain enum). The collectives name it
// sol::comm::ReduceOp; the reduction kernels under them take it too.
namespace sol {

enum class ReduceOp { sum, max };

}  // namespace sol
