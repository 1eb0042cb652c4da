#pragma once
// The pickle of a torch.save file (data.pkl), evaluated by a small bounds-checked subset of the
// pickle machine: the opcodes of protocols 2-5 as torch writes them, no code execution. Only
// four kinds of global resolve: torch._utils._rebuild_tensor_v2 (a tensor),
// torch._utils._rebuild_parameter (an nn.Parameter, read as its tensor), collections.OrderedDict
// (state dicts and backward hooks) and the torch.*Storage classes; any other global is refused
// where the pickle names it, before anything could use it. BUILD may set attributes of a dict
// (a state dict's _metadata, which is ignored) but of nothing else, so a pickle cannot retype a
// storage class or resize a tensor after the fact. docs/converter.md describes the subset.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "formats/torch_dtype.hpp"

namespace pi::formats {

// A tensor as its pickle describes it: a strided view of a storage record. Sizes, strides and
// offset are not yet checked against the storage (torch_archive does that).
struct torch_tensor_ref {
    std::string name; // the state dict key; "data.pkl" for a file holding one bare tensor
    const torch_dtype* dtype = nullptr;
    std::string key; // the storage's record: <archive>/data/<key>
    int64_t storage_numel = 0;
    int64_t offset = 0; // in elements
    std::vector<int64_t> size, stride;
};

// The single tensor of a torch.save(tensor) file. pi::error(format / unsupported) starting with
// `source` when the pickle is malformed, uses an opcode outside the subset, names a global that
// is not allowed, or does not hold one tensor.
torch_tensor_ref read_tensor_pickle(std::span<const uint8_t> pickle, const std::string& source);

// The tensors of a torch.save(state_dict) file, in the pickle's order; errors as above, naming
// the tensor where one is at fault.
std::vector<torch_tensor_ref> read_state_dict_pickle(std::span<const uint8_t> pickle,
                                                     const std::string& source);

} // namespace pi::formats
