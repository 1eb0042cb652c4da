// ZIP central-directory reader (PKWARE APPNOTE 6.3): end record, optional ZIP64 end record and
// locator, central directory entries with their ZIP64 extra field, and each entry's local header
// to find where its data starts (torch pads local headers with an "FB" extra field so that data
// starts 64-byte aligned; the local extra length covers it), and the CRC-32 of what is read whole.
#include "formats/zip_view.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "formats/little_endian.hpp"
#include "support/error.hpp"

namespace pi::formats {

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
    uint64_t le(uint64_t pos, size_t n) const { return read_le(bytes_.data() + pos, n); }
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

// The end record's position, or end_missing. Its comment length must fit the file, so that a
// signature inside a member's data is not taken for it.
constexpr uint64_t end_missing = UINT64_MAX;

uint64_t find_end_record(std::span<const uint8_t> bytes, const std::string& source) {
    const cursor c(bytes, source);
    if (c.size() < end_size) return end_missing;
    const uint64_t lowest = c.size() - end_size > 0xffff ? c.size() - end_size - 0xffff : 0;
    for (uint64_t pos = c.size() - end_size + 1; pos-- > lowest;)
        if (c.u32(pos) == sig_end && pos + end_size + c.u16(pos + 20) <= c.size()) return pos;
    return end_missing;
}

constexpr std::array<uint32_t, 256> crc_table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
        t[i] = c;
    }
    return t;
}();

uint32_t crc32_of(std::span<const uint8_t> data) {
    uint32_t crc = 0xffffffffu;
    for (uint8_t b : data)
        crc = (crc >> 8) ^ crc_table[(crc ^ b) & 0xffu];
    return ~crc;
}

directory read_directory(std::span<const uint8_t> bytes, const std::string& source) {
    const cursor c(bytes, source);
    const uint64_t end = find_end_record(bytes, source);
    if (end == end_missing)
        fail(status::format, source, ": not a zip archive (no end-of-central-directory record)");
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

bool looks_like_zip(std::span<const uint8_t> bytes) noexcept {
    return find_end_record(bytes, std::string()) != end_missing;
}

zip_view::zip_view(std::span<const uint8_t> bytes, std::string source)
    : bytes_(bytes), source_(std::move(source)) {
    const cursor c(bytes_, source_);
    const directory d = read_directory(bytes_, source_);
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
        e.crc32 = c.u32(pos + 16);
        e.stored_size = c.u32(pos + 20);
        e.size = c.u32(pos + 24);
        const uint64_t name_len = c.u16(pos + 28), extra_len = c.u16(pos + 30),
                       comment_len = c.u16(pos + 32);
        e.local_header = c.u32(pos + 42);
        if (pos + central_size + name_len + extra_len + comment_len > directory_end)
            fail(status::format, source_, ": zip central directory entry ", i,
                 " runs past the directory");
        e.name = c.text(pos + central_size, name_len);
        const std::string where = concat(source_, ": ", e.name);
        apply_zip64_extra(c, pos + central_size + name_len, extra_len, e.size, e.stored_size,
                          e.local_header, where);
        if (flags & 1) fail(status::unsupported, where, ": is encrypted");
        if (e.method == 0 && e.stored_size != e.size)
            fail(status::format, where, ": is stored but its sizes differ (", e.stored_size, " vs ",
                 e.size, ")");
        if (e.local_header >= d.offset)
            fail(status::format, where, ": local header at byte ", e.local_header,
                 " is not before the central directory");
        entries_.push_back(std::move(e));
        pos += central_size + name_len + extra_len + comment_len;
    }
}

const zip_entry* zip_view::find(std::string_view name) const noexcept {
    const auto it = std::find_if(entries_.begin(), entries_.end(),
                                 [&](const zip_entry& e) { return e.name == name; });
    return it == entries_.end() ? nullptr : &*it;
}

uint64_t zip_view::data_offset(const zip_entry& e) const {
    const cursor c(bytes_, source_);
    const std::string where = concat(source_, ": ", e.name);
    c.need(e.local_header, local_size, "local header");
    if (c.u32(e.local_header) != sig_local)
        fail(status::format, where, ": corrupt zip local header at byte ", e.local_header);
    const uint64_t name_len = c.u16(e.local_header + 26), extra_len = c.u16(e.local_header + 28);
    c.need(e.local_header + local_size, name_len, "local header name");
    if (c.text(e.local_header + local_size, name_len) != e.name)
        fail(status::format, where, ": local header names '",
             c.text(e.local_header + local_size, name_len), "'");
    return e.local_header + local_size + name_len + extra_len;
}

std::span<const uint8_t> zip_view::read(const zip_entry& e) const {
    if (e.method != 0)
        fail(status::unsupported, source_, ": ", e.name, ": is compressed (method ", e.method,
             "); torch.save stores its members uncompressed");
    const uint64_t at = data_offset(e);
    const cursor c(bytes_, source_);
    c.need(at, e.size, "member data");
    const std::span<const uint8_t> data =
        bytes_.subspan(static_cast<size_t>(at), static_cast<size_t>(e.size));
    if (const uint32_t crc = crc32_of(data); crc != e.crc32)
        fail(status::format, source_, ": ", e.name, ": corrupt zip archive (bad CRC-32: 0x",
             std::hex, crc, ", the directory says 0x", e.crc32, ")");
    return data;
}

} // namespace pi::formats
