// fuzz: the libFuzzer entry point of one target; DSV4_FUZZ_ENTRY names the function (fuzz_targets.h).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dsv4::fuzz::DSV4_FUZZ_ENTRY(data, size);
}
