#include "torch_fixture.hpp"

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace pi::test {

namespace {

class bytes_out {
  public:
    void u8(uint64_t v) { out.push_back(static_cast<uint8_t>(v)); }
    void le(uint64_t v, int n) {
        for (int i = 0; i < n; ++i)
            u8(v >> (8 * i));
    }
    void u16(uint64_t v) { le(v, 2); }
    void u32(uint64_t v) { le(v, 4); }
    void u64(uint64_t v) { le(v, 8); }
    void text(const std::string& s) { out.insert(out.end(), s.begin(), s.end()); }
    void raw(const std::vector<uint8_t>& b) { out.insert(out.end(), b.begin(), b.end()); }
    std::vector<uint8_t> out;
};

uint32_t crc32(const std::vector<uint8_t>& data) {
    uint32_t crc = 0xffffffffu;
    for (uint8_t b : data) {
        crc ^= b;
        for (int k = 0; k < 8; ++k)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

// Python's pickler (protocol 2) picks the shortest of BININT1, BININT2, BININT, LONG1.
void pickle_int(bytes_out& p, int64_t v) {
    if (v >= 0 && v <= 0xff) {
        p.u8('K');
        p.u8(static_cast<uint64_t>(v));
    } else if (v >= 0 && v <= 0xffff) {
        p.u8('M');
        p.u16(static_cast<uint64_t>(v));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        p.u8('J');
        p.u32(static_cast<uint32_t>(static_cast<int32_t>(v)));
    } else {
        p.u8(0x8a);
        p.u8(8);
        p.u64(static_cast<uint64_t>(v));
    }
}

void pickle_str(bytes_out& p, const std::string& s) {
    p.u8('X');
    p.u32(s.size());
    p.text(s);
}

void binput(bytes_out& p, uint8_t index) {
    p.u8('q');
    p.u8(index);
}

} // namespace

std::vector<uint8_t> make_zip(const std::vector<zip_record>& records, const zip_options& o) {
    bytes_out z;
    std::vector<uint64_t> offsets;
    for (const zip_record& r : records) {
        offsets.push_back(z.out.size());
        const uint64_t start = z.out.size() + 30 + r.name.size() + 4;
        const uint64_t padding = o.align64 ? (64 - start % 64) % 64 : 0;
        z.u32(0x04034b50);
        z.u16(20); // version needed
        z.u16(0);  // flags
        z.u16(r.method);
        z.u16(0);    // time
        z.u16(0x21); // date 1980-01-01
        z.u32(crc32(r.data));
        z.u32(r.data.size()); // compressed size
        z.u32(r.data.size());
        z.u16(r.name.size());
        z.u16(o.align64 ? 4 + padding : 0);
        z.text(r.name);
        if (o.align64) {
            z.text("FB");
            z.u16(padding);
            z.text(std::string(padding, 'Z'));
        }
        z.raw(r.data);
    }
    const uint64_t cd_offset = z.out.size();
    for (size_t i = 0; i < records.size(); ++i) {
        const zip_record& r = records[i];
        z.u32(0x02014b50);
        z.u16(20); // made by
        z.u16(20); // needed
        z.u16(0);
        z.u16(r.method);
        z.u16(0);
        z.u16(0x21);
        z.u32(crc32(r.data));
        z.u32(r.data.size());
        z.u32(r.data.size());
        z.u16(r.name.size());
        z.u16(0); // extra
        z.u16(0); // comment
        z.u16(0); // disk
        z.u16(0); // internal attributes
        z.u32(0); // external attributes
        z.u32(offsets[i]);
        z.text(r.name);
    }
    const uint64_t cd_size = z.out.size() - cd_offset;
    if (o.zip64_end) {
        const uint64_t end64 = z.out.size();
        z.u32(0x06064b50);
        z.u64(44); // bytes after this field
        z.u16(45);
        z.u16(45);
        z.u32(0);
        z.u32(0);
        z.u64(records.size());
        z.u64(records.size());
        z.u64(cd_size);
        z.u64(cd_offset);
        z.u32(0x07064b50);
        z.u32(0);
        z.u64(end64);
        z.u32(1);
    }
    z.u32(0x06054b50);
    z.u16(0);
    z.u16(0);
    z.u16(records.size());
    z.u16(records.size());
    z.u32(cd_size);
    z.u32(cd_offset);
    z.u16(0);
    return z.out;
}

std::vector<uint8_t> tensor_pickle(const std::string& storage_type, int64_t numel, int64_t offset,
                                   int64_t size, const std::string& key, int64_t stride) {
    bytes_out p;
    p.u8(0x80);
    p.u8(2);
    p.text("ctorch._utils\n_rebuild_tensor_v2\n");
    binput(p, 0);
    p.u8('(');
    p.u8('(');
    pickle_str(p, "storage");
    binput(p, 1);
    p.text("ctorch\n" + storage_type + "\n");
    binput(p, 2);
    pickle_str(p, key);
    binput(p, 3);
    pickle_str(p, "cpu");
    binput(p, 4);
    pickle_int(p, numel);
    p.u8('t');
    binput(p, 5);
    p.u8('Q');
    pickle_int(p, offset);
    pickle_int(p, size);
    p.u8(0x85);
    binput(p, 6);
    pickle_int(p, stride);
    p.u8(0x85);
    binput(p, 7);
    p.u8(0x89);
    p.text("ccollections\nOrderedDict\n");
    binput(p, 8);
    p.u8(')');
    p.u8('R');
    binput(p, 9);
    p.u8('t');
    binput(p, 10);
    p.u8('R');
    binput(p, 11);
    p.u8('.');
    return p.out;
}

std::vector<uint8_t> torch_file(const std::string& storage_type, std::vector<uint8_t> storage,
                                int64_t numel, int64_t offset, int64_t size,
                                const torch_file_options& o) {
    const std::string dir = o.archive + "/";
    const std::string version = "3\n";
    std::vector<zip_record> records;
    if (o.version_first) records.push_back({dir + "version", {version.begin(), version.end()}});
    records.push_back({dir + "data.pkl",
                       tensor_pickle(storage_type, numel, offset, size, "0", o.stride),
                       o.pickle_method});
    const std::string little = "little";
    records.push_back({dir + "byteorder", {little.begin(), little.end()}});
    records.push_back({dir + "data/0", std::move(storage), o.data_method});
    if (!o.version_first) records.push_back({dir + "version", {version.begin(), version.end()}});
    const std::string id = "1234567890123456789";
    records.push_back({dir + ".data/serialization_id", {id.begin(), id.end()}});
    return make_zip(records, o.zip);
}

std::vector<uint8_t> torch_file_f32(const std::vector<float>& values, const torch_file_options& o) {
    std::vector<uint8_t> storage(values.size() * 4);
    if (!storage.empty()) std::memcpy(storage.data(), values.data(), storage.size());
    const auto n = static_cast<int64_t>(values.size());
    return torch_file("FloatStorage", std::move(storage), n, 0, n, o);
}

std::vector<uint8_t> torch_file_i64(const std::vector<int64_t>& values,
                                    const torch_file_options& o) {
    std::vector<uint8_t> storage(values.size() * 8);
    if (!storage.empty()) std::memcpy(storage.data(), values.data(), storage.size());
    const auto n = static_cast<int64_t>(values.size());
    return torch_file("LongStorage", std::move(storage), n, 0, n, o);
}

pickle_writer& pickle_writer::proto() {
    return op("\x80\x02");
}

pickle_writer& pickle_writer::op(std::string_view opcodes) {
    out_.insert(out_.end(), opcodes.begin(), opcodes.end());
    return *this;
}

pickle_writer& pickle_writer::global(const std::string& module, const std::string& name) {
    return op("c" + module + "\n" + name + "\n");
}

pickle_writer& pickle_writer::str(const std::string& s) {
    bytes_out p;
    pickle_str(p, s);
    out_.insert(out_.end(), p.out.begin(), p.out.end());
    return *this;
}

pickle_writer& pickle_writer::integer(int64_t v) {
    bytes_out p;
    pickle_int(p, v);
    out_.insert(out_.end(), p.out.begin(), p.out.end());
    return *this;
}

pickle_writer& pickle_writer::int_tuple(const std::vector<int64_t>& v) {
    op("(");
    for (int64_t x : v)
        integer(x);
    return op("t");
}

pickle_writer& pickle_writer::binput(uint8_t index) {
    out_.push_back('q');
    out_.push_back(index);
    return *this;
}

std::vector<uint8_t> state_dict_pickle(const std::vector<fixture_tensor>& tensors,
                                       bool as_parameters, bool metadata) {
    pickle_writer p;
    p.proto().global("collections", "OrderedDict").op(")R(");
    for (const fixture_tensor& t : tensors) {
        p.str(t.name);
        if (as_parameters) p.global("torch._utils", "_rebuild_parameter").op("(");
        p.global("torch._utils", "_rebuild_tensor_v2").op("((");
        p.str("storage").global("torch", t.storage_type).str(t.key).str("cpu").integer(t.numel);
        p.op("tQ").integer(t.offset).int_tuple(t.size).int_tuple(t.stride);
        p.op("\x89").global("collections", "OrderedDict").op(")RtR");
        if (as_parameters) p.op("\x89").global("collections", "OrderedDict").op(")RtR");
    }
    p.op("u");
    if (metadata) {
        // {'_metadata': OrderedDict([('', {'version': 1})])}
        p.op("}").str("_metadata").global("collections", "OrderedDict").op(")R");
        p.str("").op("}").str("version").integer(1).op("ss").op("sb");
    }
    return p.op(".").bytes();
}

std::vector<uint8_t>
torch_zip(const std::vector<uint8_t>& pickle,
          const std::vector<std::pair<std::string, std::vector<uint8_t>>>& storages,
          const torch_file_options& o) {
    const std::string dir = o.archive + "/";
    std::vector<zip_record> records;
    records.push_back({dir + "data.pkl", pickle, o.pickle_method});
    const std::string little = "little";
    records.push_back({dir + "byteorder", {little.begin(), little.end()}});
    for (const auto& [key, bytes] : storages)
        records.push_back({dir + "data/" + key, bytes, o.data_method});
    const std::string version = "3\n";
    records.push_back({dir + "version", {version.begin(), version.end()}});
    return make_zip(records, o.zip);
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
}

} // namespace pi::test
