#pragma once
// Builds the bytes torch.save writes for a 1-D tensor, by hand (no torch in the test
// environment). The layout mirrors PyTorch's zip writer (caffe2/serialize/inline_container.cc:
// stored entries under "<archive>/", each local header padded with an "FB" extra field so data
// starts 64-byte aligned, ZIP64 end records) and the protocol-2 pickle of
// torch._utils._rebuild_tensor_v2 that torch.save emits.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pi::test {

struct zip_record {
    std::string name; // full name, "<archive>/data.pkl"
    std::vector<uint8_t> data;
    uint16_t method = 0; // declared method; the data is always written as is
};

struct zip_options {
    bool zip64_end = true; // PyTorch writes ZIP64 end records; Python's zipfile does not
    bool align64 = true;   // PyTorch's "FB" padding
};

std::vector<uint8_t> make_zip(const std::vector<zip_record>& records, const zip_options& o = {});

// The data.pkl of torch.save(tensor) for a tensor viewing `size` elements at `offset` of a
// storage of `numel` elements of `storage_type` ("FloatStorage", ...) stored under `key`.
std::vector<uint8_t> tensor_pickle(const std::string& storage_type, int64_t numel, int64_t offset,
                                   int64_t size, const std::string& key = "0");

struct torch_file_options {
    std::string archive = "archive"; // torch names it after the file, e.g. "activation_0"
    bool version_first = false;      // PyTorch < 2.0 wrote "version" as the first record
    uint16_t data_method = 0;
    uint16_t pickle_method = 0;
    zip_options zip;
};

// A whole torch.save file of a 1-D tensor over the given storage bytes.
std::vector<uint8_t> torch_file(const std::string& storage_type, std::vector<uint8_t> storage,
                                int64_t numel, int64_t offset, int64_t size,
                                const torch_file_options& o = {});
std::vector<uint8_t> torch_file_f32(const std::vector<float>& values,
                                    const torch_file_options& o = {});
std::vector<uint8_t> torch_file_i64(const std::vector<int64_t>& values,
                                    const torch_file_options& o = {});

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

} // namespace pi::test
