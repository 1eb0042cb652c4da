// A pickle machine for the subset torch.save emits (Python's pickletools documents each opcode).
// Values live in an arena and refer to each other by index, so a self-referencing list built by
// a hostile file cannot leak; no value is ever called or imported.
#include "planner/torch_pickle.hpp"

#include <bit>
#include <cstring>
#include <unordered_map>
#include <utility>

#include "support/error.hpp"

namespace pi::planner {

namespace {

enum class kind : uint8_t {
    none,
    boolean,
    integer,
    floating,
    string,
    global,
    tuple,
    list,
    dict,
    storage,
    tensor,
};

const char* kind_name(kind k) {
    switch (k) {
    case kind::none:
        return "None";
    case kind::boolean:
        return "bool";
    case kind::integer:
        return "int";
    case kind::floating:
        return "float";
    case kind::string:
        return "string";
    case kind::global:
        return "global";
    case kind::tuple:
        return "tuple";
    case kind::list:
        return "list";
    case kind::dict:
        return "dict";
    case kind::storage:
        return "storage";
    case kind::tensor:
        return "tensor";
    }
    return "value";
}

struct node {
    explicit node(kind k_) : k(k_) {}

    kind k;
    int64_t i = 0;
    double f = 0.0;
    std::string s;               // a string's value; a global's module
    std::string name;            // a global's name
    std::vector<uint32_t> items; // tuple/list elements, dict key-value pairs, storage: {pid},
                                 // tensor: the _rebuild_tensor_v2 arguments
};

constexpr size_t max_line = 256; // GLOBAL module and name lines

class machine {
  public:
    machine(std::span<const uint8_t> bytes, const std::string& source)
        : bytes_(bytes), source_(source) {}

    uint32_t run() {
        while (true) {
            op_pos_ = pos_;
            const uint8_t op = static_cast<uint8_t>(le(1));
            if (op == '.') return pop();
            step(op);
        }
    }

    const node& at(uint32_t index) const { return nodes_[index]; }

  private:
    template <typename... Parts> [[noreturn]] void bad(Parts&&... parts) const {
        fail(status::format, source_, ": data.pkl byte ", op_pos_, ": ",
             std::forward<Parts>(parts)...);
    }

    void need(uint64_t n) const {
        if (n > bytes_.size() - pos_)
            bad("needs ", n, " more bytes, ", bytes_.size() - pos_, " remain (truncated)");
    }
    uint64_t le(int n) {
        need(static_cast<uint64_t>(n));
        uint64_t v = 0;
        for (int i = n - 1; i >= 0; --i)
            v = (v << 8) | bytes_[pos_ + static_cast<size_t>(i)];
        pos_ += static_cast<size_t>(n);
        return v;
    }
    std::string text(uint64_t n) {
        need(n);
        std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(n));
        pos_ += static_cast<size_t>(n);
        return s;
    }
    std::string line() {
        for (size_t n = 0; n < max_line && pos_ + n < bytes_.size(); ++n) {
            if (bytes_[pos_ + n] != '\n') continue;
            std::string s = text(n);
            ++pos_;
            return s;
        }
        bad("GLOBAL line is unterminated or longer than ", max_line, " bytes");
    }

    uint32_t make(node n) {
        if (nodes_.size() >= UINT32_MAX) bad("too many values");
        nodes_.push_back(std::move(n));
        return static_cast<uint32_t>(nodes_.size() - 1);
    }
    void push(uint32_t v) { stack_.push_back(v); }
    void push(node n) { push(make(std::move(n))); }
    uint32_t pop() {
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) bad("stack underflow");
        const uint32_t v = stack_.back();
        stack_.pop_back();
        return v;
    }
    uint32_t top() const {
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) bad("stack underflow");
        return stack_.back();
    }
    std::vector<uint32_t> pop_mark() {
        if (marks_.empty()) bad("no MARK to pop to");
        const size_t mark = marks_.back();
        marks_.pop_back();
        std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark),
                                    stack_.end());
        stack_.resize(mark);
        return items;
    }
    node& container(uint32_t index, kind want, const char* op) {
        if (nodes_[index].k != want)
            bad(op, " on a ", kind_name(nodes_[index].k), ", expected a ", kind_name(want));
        return nodes_[index];
    }
    void put(uint64_t index) { memo_[index] = top(); }
    void get(uint64_t index) {
        const auto it = memo_.find(index);
        if (it == memo_.end()) bad("memo entry ", index, " was never stored");
        push(it->second);
    }
    void integer_like(kind k, int64_t v) {
        node n(k);
        n.i = v;
        push(std::move(n));
    }
    void integer(int64_t v) {
        node n(kind::integer);
        n.i = v;
        push(std::move(n));
    }
    void string(uint64_t n) {
        node s(kind::string);
        s.s = text(n);
        push(std::move(s));
    }
    void tuple(std::vector<uint32_t> items) {
        node t(kind::tuple);
        t.items = std::move(items);
        push(std::move(t));
    }
    // LONG1/LONG4: little-endian two's complement of n bytes; only 64-bit values are useful here.
    void long_integer(uint64_t n) {
        if (n > 8) bad("integer of ", n, " bytes does not fit 64 bits");
        uint64_t v = le(static_cast<int>(n));
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) v |= ~uint64_t{0} << (8 * n);
        integer(static_cast<int64_t>(v));
    }
    void reduce() {
        const uint32_t args = pop();
        const uint32_t callable = pop();
        const node& c = nodes_[callable];
        if (c.k != kind::global) bad("REDUCE calls a ", kind_name(c.k));
        if (nodes_[args].k != kind::tuple)
            bad("REDUCE arguments are a ", kind_name(nodes_[args].k));
        if (c.s == "torch._utils" && c.name == "_rebuild_tensor_v2") {
            node t(kind::tensor);
            t.items = nodes_[args].items;
            return push(std::move(t));
        }
        if (c.s == "collections" && c.name == "OrderedDict" && nodes_[args].items.empty())
            return push(node(kind::dict));
        fail(status::unsupported, source_, ": data.pkl byte ", op_pos_, ": calls ", c.s, ".",
             c.name, ", which a tensor file does not need");
    }

    void step(uint8_t op) {
        switch (op) {
        case 0x80: // PROTO
            if (const uint64_t v = le(1); v < 2 || v > 5) bad("pickle protocol ", v);
            return;
        case 0x95: // FRAME: a length hint only
            le(8);
            return;
        case 'c': { // GLOBAL
            node g(kind::global);
            g.s = line();
            g.name = line();
            return push(std::move(g));
        }
        case 0x93: { // STACK_GLOBAL
            const uint32_t name = pop(), module = pop();
            if (nodes_[name].k != kind::string || nodes_[module].k != kind::string)
                bad("STACK_GLOBAL needs two strings");
            node g(kind::global);
            g.s = nodes_[module].s;
            g.name = nodes_[name].s;
            return push(std::move(g));
        }
        case 'q': // BINPUT
            return put(le(1));
        case 'r': // LONG_BINPUT
            return put(le(4));
        case 0x94: // MEMOIZE
            return put(memo_.size());
        case 'h': // BINGET
            return get(le(1));
        case 'j': // LONG_BINGET
            return get(le(4));
        case '(': // MARK
            marks_.push_back(stack_.size());
            return;
        case 't': // TUPLE
            return tuple(pop_mark());
        case ')': // EMPTY_TUPLE
            return tuple({});
        case 0x85:   // TUPLE1
        case 0x86:   // TUPLE2
        case 0x87: { // TUPLE3
            std::vector<uint32_t> items(static_cast<size_t>(op - 0x84));
            for (size_t i = items.size(); i-- > 0;)
                items[i] = pop();
            return tuple(std::move(items));
        }
        case ']': // EMPTY_LIST
            return push(node(kind::list));
        case 'a': { // APPEND
            const uint32_t v = pop();
            container(top(), kind::list, "APPEND").items.push_back(v);
            return;
        }
        case 'e': { // APPENDS
            std::vector<uint32_t> items = pop_mark();
            std::vector<uint32_t>& list = container(top(), kind::list, "APPENDS").items;
            list.insert(list.end(), items.begin(), items.end());
            return;
        }
        case '}': // EMPTY_DICT
            return push(node(kind::dict));
        case 's': { // SETITEM
            const uint32_t v = pop(), k = pop();
            std::vector<uint32_t>& dict = container(top(), kind::dict, "SETITEM").items;
            dict.push_back(k);
            dict.push_back(v);
            return;
        }
        case 'u': { // SETITEMS
            std::vector<uint32_t> items = pop_mark();
            if (items.size() % 2 != 0) bad("SETITEMS with an odd number of values");
            std::vector<uint32_t>& dict = container(top(), kind::dict, "SETITEMS").items;
            dict.insert(dict.end(), items.begin(), items.end());
            return;
        }
        case 'N':
            return push(node(kind::none));
        case 0x88: // NEWTRUE
        case 0x89: // NEWFALSE
            return integer_like(kind::boolean, op == 0x88 ? 1 : 0);
        case 'K': // BININT1
            return integer(static_cast<int64_t>(le(1)));
        case 'M': // BININT2
            return integer(static_cast<int64_t>(le(2)));
        case 'J': // BININT
            return integer(static_cast<int32_t>(static_cast<uint32_t>(le(4))));
        case 0x8a: // LONG1
            return long_integer(le(1));
        case 0x8b: // LONG4
            return long_integer(le(4));
        case 'G': { // BINFLOAT, big-endian
            uint64_t v = 0;
            for (int i = 0; i < 8; ++i)
                v = (v << 8) | le(1);
            node f(kind::floating);
            f.f = std::bit_cast<double>(v);
            return push(std::move(f));
        }
        case 'X': // BINUNICODE
        case 'T': // BINSTRING
        case 'B': // BINBYTES
            return string(le(4));
        case 0x8c: // SHORT_BINUNICODE
        case 'U':  // SHORT_BINSTRING
        case 'C':  // SHORT_BINBYTES
            return string(le(1));
        case 0x8d: // BINUNICODE8
        case 0x8e: // BINBYTES8
            return string(le(8));
        case 'Q': { // BINPERSID
            node s(kind::storage);
            s.items.push_back(pop());
            return push(std::move(s));
        }
        case 'R':
            return reduce();
        case 'b': // BUILD: the state of hooks or attributes, not needed
            pop();
            top();
            return;
        default:
            fail(status::unsupported, source_, ": data.pkl byte ", op_pos_, ": pickle opcode 0x",
                 std::hex, static_cast<int>(op), " is outside the supported subset");
        }
    }

    std::span<const uint8_t> bytes_;
    const std::string& source_;
    size_t pos_ = 0;
    size_t op_pos_ = 0;
    std::vector<node> nodes_;
    std::vector<uint32_t> stack_;
    std::vector<size_t> marks_;
    std::unordered_map<uint64_t, uint32_t> memo_;
};

} // namespace

torch_tensor_ref read_tensor_pickle(std::span<const uint8_t> pickle, const std::string& source) {
    machine m(pickle, source);
    const node& root = m.at(m.run());
    const auto expect = [&](uint32_t index, kind k, const char* what) -> const node& {
        const node& n = m.at(index);
        if (n.k != k)
            fail(status::format, source, ": data.pkl: ", what, " is a ", kind_name(n.k),
                 ", expected a ", kind_name(k));
        return n;
    };
    const auto ints = [&](uint32_t index, const char* what) {
        std::vector<int64_t> out;
        for (uint32_t item : expect(index, kind::tuple, what).items)
            out.push_back(expect(item, kind::integer, what).i);
        return out;
    };
    if (root.k != kind::tensor)
        fail(status::format, source, ": data.pkl holds a ", kind_name(root.k),
             ", not a single tensor");
    if (root.items.size() < 4)
        fail(status::format, source, ": data.pkl: _rebuild_tensor_v2 has ", root.items.size(),
             " arguments, expected at least 4");
    const node& storage = expect(root.items[0], kind::storage, "tensor storage");
    const node& pid = expect(storage.items[0], kind::tuple, "storage persistent id");
    if (pid.items.size() != 5 || m.at(pid.items[0]).k != kind::string ||
        m.at(pid.items[0]).s != "storage")
        fail(status::format, source,
             ": data.pkl: storage persistent id is not ('storage', type, key, location, numel)");
    const node& type = expect(pid.items[1], kind::global, "storage type");
    if (type.s != "torch")
        fail(status::unsupported, source, ": data.pkl: storage type ", type.s, ".", type.name);

    torch_tensor_ref t;
    t.storage_type = type.name;
    t.key = expect(pid.items[2], kind::string, "storage key").s;
    expect(pid.items[3], kind::string, "storage location");
    t.storage_numel = expect(pid.items[4], kind::integer, "storage size").i;
    t.offset = expect(root.items[1], kind::integer, "storage offset").i;
    t.size = ints(root.items[2], "tensor size");
    t.stride = ints(root.items[3], "tensor stride");
    if (t.size.size() != t.stride.size())
        fail(status::format, source, ": data.pkl: tensor has ", t.size.size(), " sizes and ",
             t.stride.size(), " strides");
    return t;
}

} // namespace pi::planner
