// torch.save zip layout (PyTorch's inline_container writer): every record sits under one folder,
// named after the file or "archive"; data.pkl directly under it is the pickle.
#include "formats/torch_archive.hpp"

#include <algorithm>
#include <utility>

#include "support/error.hpp"

namespace pi::formats {

namespace {

zip_view open_zip(std::span<const uint8_t> file, const std::string& source) {
    if (!looks_like_zip(file))
        fail(status::format, source,
             ": not a zip-format torch.save file (the legacy format of torch < 1.6 is not read; "
             "re-save it or use safetensors)");
    return zip_view(file, source);
}

std::string archive_prefix(const zip_view& zip, const std::string& source) {
    std::string found;
    int count = 0;
    for (const zip_entry& e : zip.entries()) {
        const std::string_view name = e.name;
        if (name.size() > 9 && name.ends_with("/data.pkl") &&
            std::count(name.begin(), name.end(), '/') == 1) {
            found = e.name.substr(0, e.name.size() - 8);
            ++count;
        }
    }
    if (count != 1)
        fail(status::format, source, ": has no single <archive>/data.pkl: not a torch.save file");
    return found;
}

std::string trimmed(std::span<const uint8_t> b) {
    std::string s(b.begin(), b.end());
    const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
    while (!s.empty() && space(s.back()))
        s.pop_back();
    while (!s.empty() && space(s.front()))
        s.erase(s.begin());
    return s;
}

std::string dims(const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
        s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}

} // namespace

torch_archive::torch_archive(std::span<const uint8_t> file, std::string source,
                             uint64_t max_pickle_bytes)
    : file_(file), source_(std::move(source)), zip_(open_zip(file, source_)),
      prefix_(archive_prefix(zip_, source_)) {
    if (const zip_entry* order = zip_.find(prefix_ + "byteorder")) {
        if (order->method == 0 && order->size > 16)
            fail(status::format, source_, ": ", order->name, ": has ", order->size,
                 " bytes, more than the 16 allowed");
        const std::string value = trimmed(zip_.read(*order));
        if (value != "little" && !value.empty())
            fail(status::unsupported, source_, ": is a big-endian torch file (byteorder '", value,
                 "'); only little-endian files are read");
    }
    const zip_entry& pkl = *zip_.find(prefix_ + "data.pkl");
    // Only stored members are read, so a small file cannot inflate into gigabytes.
    if (pkl.method == 0 && pkl.size > max_pickle_bytes)
        fail(status::format, source_, ": ", pkl.name, ": has ", pkl.size, " bytes, more than the ",
             max_pickle_bytes, " allowed");
    pickle_ = zip_.read(pkl);
}

torch_tensor_data torch_archive::locate(const torch_tensor_ref& t) const {
    const auto bad = [&](status code, auto&&... parts) {
        fail(code, source_, ": ", t.name, ": ", parts...);
    };
    const zip_entry* record = zip_.find(prefix_ + "data/" + t.key);
    if (!record) bad(status::format, "storage ", t.key, " is missing from the archive");
    if (record->method != 0)
        bad(status::unsupported, "storage ", t.key,
            " is compressed; torch.save stores storages uncompressed");
    const uint64_t item = t.dtype->size;
    const auto numel = static_cast<uint64_t>(t.storage_numel);
    if (numel > record->size / item || record->size != numel * item)
        bad(status::format, "storage ", t.key, " has ", record->size, " bytes, expected ",
            t.storage_numel, " x ", item);

    const bool negative =
        std::any_of(t.size.begin(), t.size.end(), [](int64_t d) { return d < 0; }) ||
        std::any_of(t.stride.begin(), t.stride.end(), [](int64_t s) { return s < 0; });
    if (negative || t.size.size() != t.stride.size())
        bad(status::format, "invalid size ", dims(t.size), " or stride ", dims(t.stride));
    // In 128 bits, every product of a non-negative int64 pair and every sum of 64 of them fit.
    bool empty = false;
    for (int64_t d : t.size)
        empty = empty || d == 0;
    __int128 last = t.offset, elements = 1;
    for (size_t i = 0; i < t.size.size() && !empty; ++i) {
        last += static_cast<__int128>(t.size[i] - 1) * t.stride[i];
        elements *= t.size[i];
        if (elements > INT64_MAX) bad(status::format, "has more than 2^63 elements");
    }
    if (empty) last = t.offset - 1;
    if (t.offset < 0 || last >= t.storage_numel)
        bad(status::format, "reaches element ", static_cast<int64_t>(last), " of a storage of ",
            t.storage_numel);

    const uint64_t at = zip_.data_offset(*record);
    if (at > file_.size() || record->size > file_.size() - at)
        bad(status::format, "storage ", t.key, " runs past the end of the file (truncated file?)");

    torch_tensor_data d;
    d.dtype = t.dtype;
    d.shape = t.size;
    d.stride = t.stride;
    d.offset = at + static_cast<uint64_t>(t.offset) * item;
    d.span = empty ? 0 : static_cast<uint64_t>(last - t.offset + 1);
    // C order: each stride the product of the sizes after it (a dimension of 1 has no step).
    int64_t step = 1;
    for (size_t i = t.size.size(); i-- > 0 && !empty && elements > 1;) {
        d.contiguous = d.contiguous && (t.size[i] == 1 || t.stride[i] == step);
        step *= t.size[i];
    }
    return d;
}

} // namespace pi::formats
