#pragma once
// The pickle of a torch.save'd tensor (data.pkl), evaluated by a small bounds-checked subset of
// the pickle machine: enough opcodes for protocols 2-4 as torch writes them, no code execution.
// The only callables understood are torch._utils._rebuild_tensor_v2 (the tensor) and
// collections.OrderedDict (its backward hooks); storages come from persistent ids.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pi::planner {

struct torch_tensor_ref {
    std::string storage_type; // e.g. "FloatStorage", "LongStorage"
    std::string key;          // the storage's record: <archive>/data/<key>
    int64_t storage_numel = 0;
    int64_t offset = 0; // in elements
    std::vector<int64_t> size, stride;
};

// pi::error(format / unsupported) naming `source` when the pickle is malformed, uses an opcode
// outside the subset, or does not hold a single tensor.
torch_tensor_ref read_tensor_pickle(std::span<const uint8_t> pickle, const std::string& source);

} // namespace pi::planner
