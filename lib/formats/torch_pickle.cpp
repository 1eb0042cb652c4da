// A pickle machine for the subset torch.save emits (Python's pickletools documents each opcode).
// Values live in an arena and refer to each other by index, so a self-referencing list built by
// a hostile file cannot leak; no value is ever called or imported, and the work a pickle may ask
// for is capped, so that a small crafted file cannot make the reader use gigabytes.
#include "formats/torch_pickle.hpp"

#include <cstring>
#include <unordered_map>
#include <utility>

#include "formats/little_endian.hpp"
#include "support/error.hpp"

namespace pi::formats {

namespace {

enum class kind : uint8_t {
    none,
    boolean,
    integer,
    floating,
    string,
    bytes,
    callable,
    storage_class,
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
        return "str";
    case kind::bytes:
        return "bytes";
    case kind::callable:
        return "function";
    case kind::storage_class:
        return "storage class";
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

// The globals that resolve (kind::callable's `aux`).
enum class callable : uint32_t { rebuild_tensor, rebuild_parameter, ordered_dict };

struct node {
    explicit node(kind k_) : k(k_) {}

    kind k;
    uint32_t aux = 0;                   // callable: which; storage_class: unused (dtype says)
    int64_t i = 0;                      // bool/int value; storage: numel
    std::string s;                      // str/bytes value; storage: key
    const torch_dtype* dtype = nullptr; // storage_class and storage
    std::vector<uint32_t> items;        // tuple/list elements, dict key-value pairs, tensor: {args}
};

constexpr size_t max_line = 256; // GLOBAL module and name lines
// Pushes plus memo stores: a real state dict needs about twenty per tensor.
constexpr uint64_t max_work = uint64_t{1} << 23;

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
        fail(status::format, source_, ": data.pkl: cannot read the pickle: byte ", op_pos_, ": ",
             std::forward<Parts>(parts)...);
    }

    void need(uint64_t n) const {
        if (n > bytes_.size() - pos_)
            bad("needs ", n, " more bytes, ", bytes_.size() - pos_, " remain (truncated)");
    }
    uint64_t le(size_t n) {
        need(n);
        const uint64_t v = read_le(bytes_.data() + pos_, n);
        pos_ += n;
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

    void count_work() {
        if (++work_ > max_work)
            bad("more than ", max_work, " values: not a torch.save file of tensors");
    }
    void push(uint32_t v) {
        count_work();
        stack_.push_back(v);
    }
    void push(node n) {
        nodes_.push_back(std::move(n));
        push(static_cast<uint32_t>(nodes_.size() - 1));
    }
    size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
    uint32_t pop() {
        if (stack_.size() <= floor()) bad("stack underflow");
        const uint32_t v = stack_.back();
        stack_.pop_back();
        return v;
    }
    uint32_t top() const {
        if (stack_.size() <= floor()) bad("stack underflow");
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
    void put(uint64_t index) {
        count_work();
        memo_[index] = top();
    }
    void get(uint64_t index) {
        const auto it = memo_.find(index);
        if (it == memo_.end()) bad("memo entry ", index, " was never stored");
        push(it->second);
    }
    void scalar(kind k, int64_t v) {
        node n(k);
        n.i = v;
        push(std::move(n));
    }
    void string(kind k, uint64_t n) {
        node s(k);
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
        uint64_t v = le(static_cast<size_t>(n));
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) v |= ~uint64_t{0} << (8 * n);
        scalar(kind::integer, static_cast<int64_t>(v));
    }

    // The allowlist: everything else is refused here, by name, before any REDUCE.
    void global(const std::string& module, const std::string& name) {
        node g(kind::callable);
        if (module == "torch._utils" && name == "_rebuild_tensor_v2")
            g.aux = static_cast<uint32_t>(callable::rebuild_tensor);
        else if (module == "torch._utils" && name == "_rebuild_parameter")
            g.aux = static_cast<uint32_t>(callable::rebuild_parameter);
        else if (module == "collections" && name == "OrderedDict")
            g.aux = static_cast<uint32_t>(callable::ordered_dict);
        else if (const torch_dtype* d = module == "torch" ? find_torch_dtype(name) : nullptr) {
            g = node(kind::storage_class);
            g.dtype = d;
        } else
            fail(status::unsupported, source_, ": data.pkl: pickle global ", module, ".", name,
                 " is not allowed (only tensors are rebuilt; nothing was executed)");
        push(std::move(g));
    }

    void reduce() {
        const uint32_t args = pop();
        const node& c = nodes_[pop()];
        if (c.k != kind::callable) bad("REDUCE calls a ", kind_name(c.k));
        if (nodes_[args].k != kind::tuple)
            bad("REDUCE arguments are a ", kind_name(nodes_[args].k));
        const std::vector<uint32_t>& a = nodes_[args].items;
        switch (static_cast<callable>(c.aux)) {
        case callable::rebuild_tensor: {
            if (a.size() < 4) bad("_rebuild_tensor_v2 needs at least 4 arguments, got ", a.size());
            node t(kind::tensor);
            t.items = {args};
            return push(std::move(t));
        }
        case callable::rebuild_parameter:
            // nn.Parameter wraps a tensor; the wrapper carries nothing a reader needs.
            if (a.empty()) bad("_rebuild_parameter without arguments");
            return push(a[0]);
        case callable::ordered_dict:
            if (!a.empty()) bad("OrderedDict with arguments");
            return push(node(kind::dict));
        }
        bad("REDUCE calls an unknown function");
    }

    // BINPERSID: torch's persistent id ('storage', torch.<T>Storage, key, location, numel).
    void storage() {
        const node& pid = nodes_[pop()];
        const auto item = [&](size_t i) -> const node& { return nodes_[pid.items[i]]; };
        if (pid.k != kind::tuple || pid.items.size() != 5 || item(0).k != kind::string ||
            item(0).s != "storage")
            bad("persistent id is not ('storage', type, key, location, numel)");
        if (item(1).k != kind::storage_class || item(2).k != kind::string ||
            item(4).k != kind::integer || item(4).i < 0)
            bad("malformed storage id: a ", kind_name(item(1).k), ", a ", kind_name(item(2).k),
                " key and a ", kind_name(item(4).k), " size");
        node s(kind::storage);
        s.dtype = item(1).dtype;
        s.s = item(2).s;
        s.i = item(4).i;
        push(std::move(s));
    }

    void build() {
        pop(); // the state
        const node& target = nodes_[top()];
        if (target.k != kind::dict)
            bad("the pickle tries to change a ", kind_name(target.k), " (BUILD); refused");
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
            std::string module = line();
            return global(module, line());
        }
        case 0x93: { // STACK_GLOBAL
            const uint32_t name = pop(), module = pop();
            if (nodes_[name].k != kind::string || nodes_[module].k != kind::string)
                bad("STACK_GLOBAL needs two strings");
            return global(nodes_[module].s, nodes_[name].s);
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
            count_work();
            marks_.push_back(stack_.size());
            return;
        case '0': // POP
            pop();
            return;
        case '1': // POP_MARK
            pop_mark();
            return;
        case '2': // DUP
            return push(top());
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
            return scalar(kind::boolean, op == 0x88 ? 1 : 0);
        case 'K': // BININT1
            return scalar(kind::integer, static_cast<int64_t>(le(1)));
        case 'M': // BININT2
            return scalar(kind::integer, static_cast<int64_t>(le(2)));
        case 'J': // BININT
            return scalar(kind::integer, static_cast<int32_t>(static_cast<uint32_t>(le(4))));
        case 0x8a: // LONG1
            return long_integer(le(1));
        case 0x8b: // LONG4
            return long_integer(le(4));
        case 'G': // BINFLOAT: nothing a state dict needs reads a float's value, only its kind
            le(8);
            return push(node(kind::floating));
        case 'X': // BINUNICODE
        case 'T': // BINSTRING (read as str, as Python 3 does)
            return string(kind::string, le(4));
        case 0x8c: // SHORT_BINUNICODE
        case 'U':  // SHORT_BINSTRING
            return string(kind::string, le(1));
        case 0x8d: // BINUNICODE8
            return string(kind::string, le(8));
        case 'B': // BINBYTES
            return string(kind::bytes, le(4));
        case 'C': // SHORT_BINBYTES
            return string(kind::bytes, le(1));
        case 0x8e: // BINBYTES8
            return string(kind::bytes, le(8));
        case 'Q': // BINPERSID
            return storage();
        case 'R':
            return reduce();
        case 'b':
            return build();
        default:
            fail(status::unsupported, source_, ": data.pkl: cannot read the pickle: byte ", op_pos_,
                 ": pickle opcode 0x", std::hex, static_cast<int>(op),
                 " is outside the supported subset");
        }
    }

    std::span<const uint8_t> bytes_;
    const std::string& source_;
    size_t pos_ = 0;
    size_t op_pos_ = 0;
    uint64_t work_ = 0;
    std::vector<node> nodes_;
    std::vector<uint32_t> stack_;
    std::vector<size_t> marks_;
    std::unordered_map<uint64_t, uint32_t> memo_;
};

// A tensor node's _rebuild_tensor_v2(storage, offset, size, stride, ...) as a reference;
// errors name the tensor.
torch_tensor_ref tensor_of(const machine& m, const node& tensor, std::string name,
                           const std::string& source) {
    const std::vector<uint32_t>& args = m.at(tensor.items[0]).items;
    const node& storage = m.at(args[0]);
    if (storage.k != kind::storage)
        fail(status::format, source, ": ", name,
             ": _rebuild_tensor_v2 called on something that is not a storage (a ",
             kind_name(storage.k), ")");
    const auto ints = [&](const node& n, std::vector<int64_t>& out) {
        if (n.k != kind::tuple) return false;
        for (uint32_t item : n.items) {
            if (m.at(item).k != kind::integer) return false;
            out.push_back(m.at(item).i);
        }
        return true;
    };
    torch_tensor_ref t;
    const node& offset = m.at(args[1]);
    if (offset.k != kind::integer || !ints(m.at(args[2]), t.size) || !ints(m.at(args[3]), t.stride))
        fail(status::format, source, ": ", name,
             ": storage offset, size and stride must be integers (got a ", kind_name(offset.k),
             ", a ", kind_name(m.at(args[2]).k), " and a ", kind_name(m.at(args[3]).k),
             " of other values)");
    t.name = std::move(name);
    t.dtype = storage.dtype;
    t.key = storage.s;
    t.storage_numel = storage.i;
    t.offset = offset.i;
    return t;
}

} // namespace

torch_tensor_ref read_tensor_pickle(std::span<const uint8_t> pickle, const std::string& source) {
    machine m(pickle, source);
    const node& root = m.at(m.run());
    if (root.k != kind::tensor)
        fail(status::format, source, ": data.pkl: holds a ", kind_name(root.k),
             ", not a single tensor");
    return tensor_of(m, root, "data.pkl", source);
}

std::vector<torch_tensor_ref> read_state_dict_pickle(std::span<const uint8_t> pickle,
                                                     const std::string& source) {
    machine m(pickle, source);
    const node& root = m.at(m.run());
    if (root.k != kind::dict)
        fail(status::format, source, ": data.pkl: holds a ", kind_name(root.k),
             ", not a state dict of tensors");
    std::vector<torch_tensor_ref> tensors;
    std::unordered_map<std::string, size_t> index; // a repeated key keeps its place, as in Python
    for (size_t i = 0; i + 1 < root.items.size(); i += 2) {
        const node& key = m.at(root.items[i]);
        const node& value = m.at(root.items[i + 1]);
        if (key.k != kind::string)
            fail(status::format, source, ": data.pkl: a state dict key is a ", kind_name(key.k),
                 ", not a string");
        if (value.k != kind::tensor)
            fail(status::format, source, ": ", key.s, ": holds a ", kind_name(value.k),
                 ", not a tensor");
        torch_tensor_ref t = tensor_of(m, value, key.s, source);
        const auto [it, added] = index.emplace(key.s, tensors.size());
        if (added)
            tensors.push_back(std::move(t));
        else
            tensors[it->second] = std::move(t);
    }
    return tensors;
}

} // namespace pi::formats
