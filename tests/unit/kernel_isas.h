// tests: the ISAs a kernel test sweeps — scalar (the plain reference build) plus every faster one this
// CPU supports, so one test binary checks each dispatch target the machine can execute.
#pragma once

#include <vector>

#include "kernels/cpu/isa.h"

namespace dsv4::kernels {

inline std::vector<Isa> isas() {
  std::vector<Isa> v{Isa::kScalar};
  for (Isa i : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx})
    if (isa_supported(i)) v.push_back(i);
  return v;
}

}  // namespace dsv4::kernels
