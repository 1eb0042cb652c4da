// ZIP central-directory reader (PKWARE APPNOTE 6.3): end record, optional ZIP64 end record and
// locator, central directory entries with their ZIP64 extra field, and each entry's local header
// to find where its data starts (torch pads local headers with an "FB" extra field so that data
// starts 64-byte aligned; the local extra length covers it).
#include "planner/torch_zip.hpp"

#include <algorithm>
#include <utility>

#include "support/error.hpp"

namespace pi::planner {

namespace {

constexpr uint32_t sig_local = 0x04034b50;
constexpr uint32_t sig_central = 0x02014b50;
constexpr uint32_t sig_end = 0x06054b50;
constexpr uint32_t sig_end64 = 0x06064b50;
constexpr uint32_t sig_locator64 = 0x07064b50;
constexpr uint64_t end_size = 22, locator64_size = 20, end64_size = 56;
constexpr uint64_t central_size = 46, local_size = 30;
constexpr uint16_t zip64_extra_id = 0x0001;

// Little-endian field reads at an absolute position; the caller has checked the range.
class cursor {
  public:
    cursor(std::span<const uint8_t> bytes, const std::string& source)
        : bytes_(bytes), source_(source) {}

    void need(uint64_t pos, uint64_t n, const char* what) const {
        if (pos > bytes_.size() || n > bytes_.size() - pos)
            fail(status::format, source_, ": zip ", what, " at byte ", pos, " (", n,
                 " bytes) runs past the end of the ", bytes_.size(), "-byte file (truncated?)");
    }
    uint64_t le(uint64_t pos, int n) const {
        uint64_t v = 0;
        for (int i = n - 1; i >= 0; --i)
            v = (v << 8) | bytes_[pos + static_cast<uint64_t>(i)];
        return v;
    }
    uint16_t u16(uint64_t pos) const { return static_cast<uint16_t>(le(pos, 2)); }
    uint32_t u32(uint64_t pos) const { return static_cast<uint32_t>(le(pos, 4)); }
    uint64_t u64(uint64_t pos) const { return le(pos, 8); }
    std::string text(uint64_t pos, uint64_t n) const {
        return {reinterpret_cast<const char*>(bytes_.data() + pos), static_cast<size_t>(n)};
    }
    uint64_t size() const noexcept { return bytes_.size(); }

  private:
    std::span<const uint8_t> bytes_;
    const std::string& source_;
};

struct directory {
    uint64_t count = 0, offset = 0, size = 0;
};

uint64_t find_end_record(const cursor& c, const std::string& source) {
    if (c.size() < end_size)
        fail(status::format, source, ": ", c.size(), " bytes is too short for a zip archive");
    const uint64_t lowest = c.size() - end_size > 0xffff ? c.size() - end_size - 0xffff : 0;
    for (uint64_t pos = c.size() - end_size + 1; pos-- > lowest;)
        if (c.u32(pos) == sig_end && pos + end_size + c.u16(pos + 20) <= c.size()) return pos;
    fail(status::format, source, ": no zip end-of-central-directory record (not a zip file)");
}

directory read_directory(const cursor& c, const std::string& source) {
    const uint64_t end = find_end_record(c, source);
    if (c.u16(end + 4) != 0 || c.u16(end + 6) != 0)
        fail(status::unsupported, source, ": multi-disk zip archives are not supported");
    directory d{c.u16(end + 10), c.u32(end + 16), c.u32(end + 12)};
    uint64_t directory_end = end;
    // torch writes ZIP64 end records even for small archives; their values win when present.
    if (end >= locator64_size && c.u32(end - locator64_size) == sig_locator64) {
        const uint64_t locator = end - locator64_size;
        const uint64_t end64 = c.u64(locator + 8);
        c.need(end64, end64_size, "ZIP64 end record");
        if (c.u32(end64) != sig_end64)
            fail(status::format, source, ": zip ZIP64 end record at byte ", end64,
                 " has a bad signature");
        if (end64 > locator)
            fail(status::format, source, ": zip ZIP64 end record overlaps its locator");
        if (c.u32(end64 + 16) != 0 || c.u32(end64 + 20) != 0)
            fail(status::unsupported, source, ": multi-disk zip archives are not supported");
        d = {c.u64(end64 + 32), c.u64(end64 + 48), c.u64(end64 + 40)};
        directory_end = end64;
    }
    if (d.offset > directory_end || d.size > directory_end - d.offset)
        fail(status::format, source, ": zip central directory [", d.offset, ", +", d.size,
             ") lies outside the archive");
    if (d.count > d.size / central_size)
        fail(status::format, source, ": zip central directory of ", d.size, " bytes cannot hold ",
             d.count, " entries");
    return d;
}

// Replaces the 32-bit fields that read 0xffffffff with the values of the ZIP64 extra field.
void apply_zip64_extra(const cursor& c, uint64_t extra, uint64_t extra_len, uint64_t& size,
                       uint64_t& csize, uint64_t& local, const std::string& where) {
    for (uint64_t pos = extra; pos + 4 <= extra + extra_len;) {
        const uint16_t id = c.u16(pos), len = c.u16(pos + 2);
        if (pos + 4 + len > extra + extra_len)
            fail(status::format, where, ": extra field runs past its entry");
        if (id == zip64_extra_id) {
            uint64_t at = pos + 4;
            for (uint64_t* field : {&size, &csize, &local}) {
                if (*field != 0xffffffff) continue;
                if (at + 8 > pos + 4 + len)
                    fail(status::format, where, ": ZIP64 extra field is too short");
                *field = c.u64(at);
                at += 8;
            }
            return;
        }
        pos += 4 + len;
    }
    if (size == 0xffffffff || csize == 0xffffffff || local == 0xffffffff)
        fail(status::format, where, ": 32-bit size or offset marker without a ZIP64 extra field");
}

} // namespace

zip_view::zip_view(std::span<const uint8_t> bytes, std::string source)
    : bytes_(bytes), source_(std::move(source)) {
    const cursor c(bytes_, source_);
    const directory d = read_directory(c, source_);
    uint64_t pos = d.offset;
    const uint64_t directory_end = d.offset + d.size;
    entries_.reserve(static_cast<size_t>(d.count));
    for (uint64_t i = 0; i < d.count; ++i) {
        if (pos + central_size > directory_end || c.u32(pos) != sig_central)
            fail(status::format, source_, ": zip central directory entry ", i, " at byte ", pos,
                 " is missing or has a bad signature");
        const uint16_t flags = c.u16(pos + 8);
        zip_entry e;
        e.method = c.u16(pos + 10);
        uint64_t csize = c.u32(pos + 20);
        e.size = c.u32(pos + 24);
        const uint64_t name_len = c.u16(pos + 28), extra_len = c.u16(pos + 30),
                       comment_len = c.u16(pos + 32);
        uint64_t local = c.u32(pos + 42);
        if (pos + central_size + name_len + extra_len + comment_len > directory_end)
            fail(status::format, source_, ": zip central directory entry ", i,
                 " runs past the directory");
        e.name = c.text(pos + central_size, name_len);
        const std::string where = concat(source_, ": zip entry '", e.name, "'");
        apply_zip64_extra(c, pos + central_size + name_len, extra_len, e.size, csize, local, where);
        if (flags & 1) fail(status::unsupported, where, " is encrypted");
        if (e.method == 0 && csize != e.size)
            fail(status::format, where, " is stored but its sizes differ (", csize, " vs ", e.size,
                 ")");

        c.need(local, local_size, "local header");
        if (c.u32(local) != sig_local)
            fail(status::format, where, ": local header at byte ", local, " has a bad signature");
        const uint64_t local_name = c.u16(local + 26), local_extra = c.u16(local + 28);
        c.need(local + local_size, local_name + local_extra, "local header name");
        if (c.text(local + local_size, local_name) != e.name)
            fail(status::format, where, ": local header names '",
                 c.text(local + local_size, local_name), "'");
        e.data_offset = local + local_size + local_name + local_extra;
        c.need(e.data_offset, csize, "entry data");
        entries_.push_back(std::move(e));
        pos += central_size + name_len + extra_len + comment_len;
    }
}

const zip_entry* zip_view::find(std::string_view name) const noexcept {
    const auto it = std::find_if(entries_.begin(), entries_.end(),
                                 [&](const zip_entry& e) { return e.name == name; });
    return it == entries_.end() ? nullptr : &*it;
}

std::span<const uint8_t> zip_view::data(const zip_entry& e) const {
    if (e.method != 0)
        fail(status::unsupported, source_, ": zip entry '", e.name, "' is compressed (method ",
             e.method, "); only stored entries are supported");
    return bytes_.subspan(static_cast<size_t>(e.data_offset), static_cast<size_t>(e.size));
}

} // namespace pi::planner
