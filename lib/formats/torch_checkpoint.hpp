#pragma once
// The tensors of a torch.save'd state dict (pytorch_model*.bin, PowerInfer's predictor
// model_<L>.pt), described but not read: each one's type, shape, strides and place in the file,
// so that a caller maps or copies one tensor at a time. The converter reads its torch
// checkpoints through this (docs/converter.md).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "formats/torch_archive.hpp"

namespace pi::formats {

struct torch_checkpoint_tensor {
    std::string name;
    torch_tensor_data data;
};

// In the pickle's order. pi::error(format / unsupported) as "<source>: <tensor or record>:
// <reason>" for anything that is not a state dict of tensors lying inside the file.
std::vector<torch_checkpoint_tensor>
read_torch_checkpoint(std::span<const uint8_t> file, const std::string& source,
                      uint64_t max_pickle_bytes = default_max_pickle_bytes);

} // namespace pi::formats
