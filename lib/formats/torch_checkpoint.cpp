#include "formats/torch_checkpoint.hpp"

#include <utility>

namespace pi::formats {

std::vector<torch_checkpoint_tensor> read_torch_checkpoint(std::span<const uint8_t> file,
                                                           const std::string& source,
                                                           uint64_t max_pickle_bytes) {
    const torch_archive archive(file, source, max_pickle_bytes);
    std::vector<torch_checkpoint_tensor> out;
    for (torch_tensor_ref& t : read_state_dict_pickle(archive.pickle(), source)) {
        torch_tensor_data data = archive.locate(t);
        out.push_back({std::move(t.name), std::move(data)});
    }
    return out;
}

} // namespace pi::formats
