#pragma once
// Builds the bytes torch.save writes for a 1-D tensor, by hand (no torch in the test
// environment). The layout mirrors PyTorch's zip writer (caffe2/serialize/inline_container.cc:
// stored entries under "<archive>/", each local header padded with an "FB" extra field so data
// starts 64-byte aligned, ZIP64 end records) and the protocol-2 pickle of
// torch._utils._rebuild_tensor_v2 that torch.save emits.
#include <cstdint>
#include <string>
#include <string_view>
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
// storage of `numel` elements of `storage_type` ("FloatStorage", ...) stored under `key`, one
// every `stride` elements (0: an expanded tensor repeating one element).
std::vector<uint8_t> tensor_pickle(const std::string& storage_type, int64_t numel, int64_t offset,
                                   int64_t size, const std::string& key = "0", int64_t stride = 1);

struct torch_file_options {
    std::string archive = "archive"; // torch names it after the file, e.g. "activation_0"
    bool version_first = false;      // PyTorch < 2.0 wrote "version" as the first record
    uint16_t data_method = 0;
    uint16_t pickle_method = 0;
    zip_options zip;
    int64_t stride = 1; // the tensor's stride in its storage
};

// A whole torch.save file of a 1-D tensor over the given storage bytes.
std::vector<uint8_t> torch_file(const std::string& storage_type, std::vector<uint8_t> storage,
                                int64_t numel, int64_t offset, int64_t size,
                                const torch_file_options& o = {});
std::vector<uint8_t> torch_file_f32(const std::vector<float>& values,
                                    const torch_file_options& o = {});
std::vector<uint8_t> torch_file_i64(const std::vector<int64_t>& values,
                                    const torch_file_options& o = {});

// Pickle opcodes one at a time, for crafted pickles: what Python's pickler (protocol 2) writes.
class pickle_writer {
  public:
    pickle_writer& proto();                                                    // PROTO 2
    pickle_writer& op(std::string_view opcodes);                               // raw opcode bytes
    pickle_writer& global(const std::string& module, const std::string& name); // GLOBAL
    pickle_writer& str(const std::string& s);                                  // BINUNICODE
    pickle_writer& integer(int64_t v); // BININT1/BININT2/BININT/LONG1, the shortest
    pickle_writer& int_tuple(const std::vector<int64_t>& v); // MARK ints TUPLE
    pickle_writer& binput(uint8_t index);
    std::vector<uint8_t> bytes() const { return out_; }

  private:
    std::vector<uint8_t> out_;
};

// One tensor of a state dict: `size`/`stride` view `numel` elements of storage record `key`.
struct fixture_tensor {
    std::string name;
    std::string storage_type = "FloatStorage";
    std::string key = "0";
    int64_t numel = 0;
    int64_t offset = 0;
    std::vector<int64_t> size, stride;
};

// The data.pkl of torch.save(state_dict): OrderedDict() filled by SETITEMS with
// _rebuild_tensor_v2 calls; `as_parameters` wraps each in _rebuild_parameter (nn.Parameter),
// `metadata` ends with the BUILD of the state dict's _metadata as torch writes it.
std::vector<uint8_t> state_dict_pickle(const std::vector<fixture_tensor>& tensors,
                                       bool as_parameters = false, bool metadata = false);

// A torch.save zip of `pickle` plus the given storage records (key, bytes).
std::vector<uint8_t>
torch_zip(const std::vector<uint8_t>& pickle,
          const std::vector<std::pair<std::string, std::vector<uint8_t>>>& storages,
          const torch_file_options& o = {});

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

} // namespace pi::test
