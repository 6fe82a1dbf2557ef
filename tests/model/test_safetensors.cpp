// core/base/mapped_file and core/model/safetensors: the mapping, and the strict header parse (every error
// names the file, the tensor and the problem).
#include "core/base/mapped_file.h"
#include "core/model/safetensors.h"

#include "tests/safetensors_writer.h"
#include "tests/test_support.h"

#include <cstring>

namespace cc {
namespace {

using test::TensorSpec;

std::span<const std::byte> as_bytes(const std::string& s) {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// The message of the std::runtime_error that parsing `bytes` throws ("" when it parses).
std::string parse_error(const std::string& bytes, const std::string& source = "x.safetensors") {
    try {
        parse_safetensors_header(as_bytes(bytes), bytes.size(), source);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

// A file whose header is `header` (tensors described by hand) followed by `data_bytes` bytes.
std::string raw(const std::string& header, size_t data_bytes) {
    return test::safetensors_bytes(header, test::ramp_data(data_bytes));
}

TEST(MappedFile, MapsWholeFileReadOnly) {
    test::TempDir tmp;
    const auto path = tmp.path() / "a.bin";
    test::write_bytes(path, "hello, mapping");
    MappedFile f(path);
    ASSERT_EQ(f.size(), 14u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.data()), f.size()), "hello, mapping");
    EXPECT_EQ(f.path(), path);

    MappedFile moved(std::move(f));
    EXPECT_EQ(moved.size(), 14u);
    EXPECT_EQ(f.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(f.data(), nullptr);
    MappedFile assigned;
    assigned = std::move(moved);
    EXPECT_EQ(assigned.bytes().size(), 14u);
    EXPECT_EQ(static_cast<char>(assigned.bytes()[7]), 'm');
}

TEST(MappedFile, EmptyFileIsEmptySpan) {
    test::TempDir tmp;
    test::write_bytes(tmp.path() / "empty", "");
    MappedFile f(tmp.path() / "empty");
    EXPECT_EQ(f.size(), 0u);
    EXPECT_TRUE(f.bytes().empty());
}

TEST(MappedFile, MissingFileNamesFileAndReason) {
    test::TempDir tmp;
    const auto path = tmp.path() / "absent.safetensors";
    try {
        MappedFile f(path);
        FAIL() << "expected an error";
    } catch (const std::runtime_error& e) {
        EXPECT_HAS(e.what(), path.string());
        EXPECT_HAS(e.what(), std::strerror(ENOENT));
    }
}

TEST(MappedFile, DirectoryIsRefused) {
    test::TempDir tmp;
    EXPECT_THROW(MappedFile f(tmp.path()), std::runtime_error);
}

TEST(Safetensors, DtypesNames) {
    EXPECT_STREQ(dtype_name(DType::f32), "F32");
    EXPECT_STREQ(dtype_name(DType::f16), "F16");
    EXPECT_STREQ(dtype_name(DType::bf16), "BF16");
    EXPECT_EQ(dtype_bytes(DType::f32), 4u);
    EXPECT_EQ(dtype_bytes(DType::f16), 2u);
    EXPECT_EQ(dtype_bytes(DType::bf16), 2u);
}

TEST(Safetensors, ParsesF32F16Bf16AndReadsTheirBytes) {
    test::TempDir tmp;
    const auto path = tmp.path() / "m.safetensors";
    test::write_bytes(path, test::safetensors_bytes(
                                {{"a", "F32", {2, 3}}, {"b", "BF16", {5}}, {"c", "F16", {1, 2, 2}}, {"s", "F32", {}}}));
    SafetensorsFile f(path);
    ASSERT_EQ(f.tensors().size(), 4u);
    const TensorInfo* a = f.find("a");
    const TensorInfo* b = f.find("b");
    const TensorInfo* c = f.find("c");
    const TensorInfo* s = f.find("s");
    ASSERT_TRUE(a && b && c && s);
    EXPECT_EQ(f.find("d"), nullptr);
    EXPECT_EQ(a->dtype, DType::f32);
    EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a->offset, 0u);
    EXPECT_EQ(a->n_bytes, 24u);
    EXPECT_EQ(b->dtype, DType::bf16);
    EXPECT_EQ(b->offset, 24u);
    EXPECT_EQ(b->n_bytes, 10u);
    EXPECT_EQ(c->dtype, DType::f16);
    EXPECT_EQ(c->shape, (std::vector<int64_t>{1, 2, 2}));
    EXPECT_EQ(c->n_bytes, 8u);
    EXPECT_TRUE(s->shape.empty());  // a scalar: one element
    EXPECT_EQ(s->n_bytes, 4u);
    // The data section holds the ramp; each tensor's span starts at its offset in it.
    for (const TensorInfo* t : {a, b, c, s}) {
        const auto d = f.data(*t);
        ASSERT_EQ(d.size(), t->n_bytes);
        for (size_t i = 0; i < d.size(); ++i)
            ASSERT_EQ(static_cast<char>(d[i]), test::ramp_byte(t->offset + i)) << t->name << " " << i;
    }
    EXPECT_EQ(f.path(), path);
}

TEST(Safetensors, BytesInMemoryParseAsAFileDoes) {
    const std::string bytes = test::safetensors_bytes({{"a", "F32", {2, 3}}, {"b", "BF16", {5}}});
    SafetensorsFile f(as_bytes(bytes), "builtin:x model.safetensors");
    EXPECT_FALSE(f.mapped());
    EXPECT_EQ(f.path(), std::filesystem::path("builtin:x model.safetensors"));
    const TensorInfo* b = f.find("b");
    ASSERT_NE(b, nullptr);
    const auto d = f.data(*b);
    ASSERT_EQ(d.size(), 10u);
    EXPECT_EQ(d.data(), as_bytes(bytes).data() + (bytes.size() - 10));  // in place, no copy
    // the same strict checks, naming the source
    const std::string cut = bytes.substr(0, bytes.size() - 1);
    try {
        SafetensorsFile bad(as_bytes(cut), "builtin:x model.safetensors");
        FAIL() << "a truncated checkpoint parsed";
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()).rfind("builtin:x model.safetensors: ", 0), 0u) << e.what();
    }
}

TEST(Safetensors, EmptyHeaderAndZeroSizedTensors) {
    EXPECT_EQ(parse_error(raw("{}", 0)), "");
    EXPECT_EQ(parse_error(test::safetensors_bytes({{"z", "F32", {0, 4}}, {"a", "F16", {2}}})), "");
}

TEST(Safetensors, DataStartIsAfterTheHeader) {
    const std::string bytes = test::safetensors_bytes({{"a", "F32", {2}}});
    size_t start = 0;
    const auto t = parse_safetensors_header(as_bytes(bytes), bytes.size(), "x", &start);
    EXPECT_EQ(start, bytes.size() - 8);
    EXPECT_EQ(start % 8, 0u);  // the writer pads to 8, as the reference does
}

TEST(Safetensors, UnsupportedDtypeRefusedByName) {
    EXPECT_EQ(parse_error(test::safetensors_bytes({{"x", "I64", {2}}}), "model.safetensors"),
              "model.safetensors: tensor \"x\": dtype \"I64\" is not supported (F32, F16, BF16)");
    for (const char* dtype : {"F64", "F8_E4M3", "I8", "U8", "BOOL"})
        EXPECT_HAS(parse_error(test::safetensors_bytes({{"w", dtype, {4}}})),
                   std::string("tensor \"w\": dtype \"") + dtype + "\" is not supported");
}

TEST(Safetensors, HeaderLengthBeyondFile) {
    std::string bytes = test::safetensors_bytes({{"a", "F32", {2}}});
    bytes[0] = static_cast<char>(0xf0);  // header length now larger than the file
    EXPECT_HAS(parse_error(bytes), "x.safetensors: header length");
    EXPECT_HAS(parse_error(bytes), "beyond the end of the file");
}

TEST(Safetensors, HeaderLengthOverLimit) {
    std::string bytes(16, '\0');
    bytes[4] = 1;  // 2^32
    EXPECT_HAS(parse_error(bytes), "x.safetensors: header length 4294967296");
    EXPECT_HAS(parse_error(bytes), "100 MiB");
}

TEST(Safetensors, FileShorterThanLengthField) {
    EXPECT_HAS(parse_error("abc"), "x.safetensors: file is 3 bytes, too short");
    EXPECT_HAS(parse_error(""), "x.safetensors: file is 0 bytes");
    const std::string whole = test::safetensors_bytes({{"a", "F32", {2}}});
    EXPECT_HAS(parse_error(whole.substr(0, 5)), "x.safetensors: file is 5 bytes");
    EXPECT_THROW(parse_safetensors_header(as_bytes(whole).first(4), whole.size(), "x"), std::runtime_error);
}

TEST(Safetensors, HeaderNotJson) {
    EXPECT_HAS(parse_error(raw("{\"a\": {\"dtype\": \"F32\",", 0)), "x.safetensors: header: invalid JSON");
    EXPECT_HAS(parse_error(raw("[1, 2]", 0)), "x.safetensors: header is not a JSON object");
    EXPECT_HAS(parse_error(raw("", 0)), "x.safetensors: header is not a JSON object");
    EXPECT_HAS(parse_error(raw("{\"a\": [[[[[[[[[[1]]]]]]]]]]}", 0)), "JSON nesting deeper than");
}

TEST(Safetensors, EntryFieldsChecked) {
    const auto entry = [](const std::string& body) { return raw("{\"t\": {" + body + "}}", 8); };
    EXPECT_HAS(parse_error(entry(R"("dtype": "F32", "shape": [2])")), "tensor \"t\": missing \"data_offsets\"");
    EXPECT_HAS(parse_error(entry(R"("dtype": 1, "shape": [2], "data_offsets": [0, 8])")),
               "tensor \"t\": \"dtype\" must be a string");
    EXPECT_HAS(parse_error(entry(R"("dtype": "F32", "shape": [-2], "data_offsets": [0, 8])")),
               "tensor \"t\": \"shape\" must be an array of non-negative integers");
    EXPECT_HAS(parse_error(entry(R"("dtype": "F32", "shape": [2.0], "data_offsets": [0, 8])")),
               "tensor \"t\": \"shape\" must be an array of non-negative integers");
    EXPECT_HAS(parse_error(entry(R"("dtype": "F32", "shape": 2, "data_offsets": [0, 8])")),
               "\"shape\" must be an array");
    EXPECT_HAS(parse_error(entry(R"("dtype": "F32", "shape": [2], "data_offsets": [0])")),
               "tensor \"t\": \"data_offsets\" must be [begin, end]");
    EXPECT_HAS(parse_error(entry(R"("dtype": "F32", "shape": [2], "data_offsets": [0, 8], "extra": 1)")),
               "tensor \"t\": unknown key \"extra\"");
    EXPECT_HAS(parse_error(raw(R"({"t": [1]})", 0)), "tensor \"t\": entry must be an object");
    EXPECT_EQ(parse_error(entry(R"("dtype": "F32", "shape": [2], "data_offsets": [0, 8])")), "");
}

TEST(Safetensors, ShapeProductOverflowRefused) {
    const auto bytes =
        raw(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 8]}})", 8);
    EXPECT_HAS(parse_error(bytes), "tensor \"t\": shape [4294967296, 4294967296, 16] overflows 64 bits");
    const auto bytes2 = raw(R"({"t": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 8]}})", 8);
    EXPECT_HAS(parse_error(bytes2), "overflows 64 bits");
}

TEST(Safetensors, OffsetsOutOfRange) {
    EXPECT_HAS(parse_error(raw(R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8)),
               "x.safetensors: tensor \"t\": data_offsets [0, 16] go beyond the data section (8 bytes)");
    EXPECT_HAS(parse_error(raw(R"({"t": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})", 8)),
               "tensor \"t\": data_offsets [8, 0] has begin > end");
}

TEST(Safetensors, SizeShapeMismatch) {
    EXPECT_EQ(parse_error(raw(R"({"t": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})", 8)),
              "x.safetensors: tensor \"t\": data_offsets [0, 8] hold 8 bytes, but shape [3] BF16 needs 6");
}

TEST(Safetensors, OverlappingTensors) {
    const auto bytes = raw(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                           16);
    EXPECT_HAS(parse_error(bytes), "x.safetensors: tensor \"b\": data [8, 16) overlaps tensor \"a\" [0, 16)");
    // The same region named twice.
    const auto same = raw(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                          8);
    EXPECT_HAS(parse_error(same), "overlaps tensor");
}

TEST(Safetensors, GapsAndTrailingBytesRefused) {
    const auto gap = raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                             "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                         12);
    EXPECT_HAS(parse_error(gap), "tensor \"b\": data starts at 8, leaving a gap after byte 4");
    const auto trailing = raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 12);
    EXPECT_HAS(parse_error(trailing), "x.safetensors: tensors cover 4 of the 12 data bytes");
}

TEST(Safetensors, DuplicateTensorNameRefused) {
    const auto bytes = raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                               "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                           8);
    EXPECT_HAS(parse_error(bytes), "x.safetensors: tensor \"a\": appears twice in the header");
    const auto inner = raw(R"({"a": {"dtype": "F32", "shape": [1], "shape": [1], "data_offsets": [0, 4]}})", 4);
    EXPECT_HAS(parse_error(inner), "the key \"shape\" twice");
}

TEST(Safetensors, MetadataMustBeStrings) {
    EXPECT_EQ(parse_error(raw(R"({"__metadata__": {"format": "pt", "x": ""}})", 0)), "");
    EXPECT_HAS(parse_error(raw(R"({"__metadata__": {"format": 1}})", 0)),
               "x.safetensors: \"__metadata__\" must be an object of strings (\"format\" is number)");
    EXPECT_HAS(parse_error(raw(R"({"__metadata__": "pt"})", 0)), "\"__metadata__\" must be an object of strings");
}

TEST(Safetensors, TruncatedFileNamesFileAndTensor) {
    test::TempDir tmp;
    const auto path = tmp.path() / "model.safetensors";
    const std::string whole = test::safetensors_bytes({{"a", "F32", {4}}, {"b", "F32", {8}}});
    test::write_bytes(path, whole.substr(0, whole.size() - 5));
    try {
        SafetensorsFile f(path);
        FAIL() << "expected an error";
    } catch (const std::runtime_error& e) {
        EXPECT_HAS(e.what(), path.string() + ": tensor \"b\"");
        EXPECT_HAS(e.what(), "go beyond the data section");
    }
    // Cut inside the header.
    test::write_bytes(path, whole.substr(0, 20));
    EXPECT_THROW(SafetensorsFile{path}, std::runtime_error);
}

TEST(Safetensors, PartialBytesGivenWithFullFileSize) {
    // The header may be parsed from a prefix of the file (the first 8 + N bytes).
    const std::string whole = test::safetensors_bytes({{"a", "F32", {64}}});
    size_t start = 0;
    const auto tensors = parse_safetensors_header(as_bytes(whole).first(whole.size() - 256), whole.size(), "x", &start);
    ASSERT_EQ(tensors.size(), 1u);
    EXPECT_EQ(tensors[0].n_bytes, 256u);
    EXPECT_THROW(parse_safetensors_header(as_bytes(whole).first(10), whole.size(), "x"), std::runtime_error);
}

TEST(Safetensors, FuzzSeedsParse) {
    // The hand-written seeds (*.safetensors) are valid files; the inputs libFuzzer added (named by
    // their SHA-1, scripts/fuzz.sh) are mostly invalid on purpose.
    const auto dir = test::source_dir() / "fuzz" / "corpus" / "safetensors_header";
    int n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() != ".safetensors") continue;
        EXPECT_NO_THROW(SafetensorsFile{entry.path()}) << entry.path();
        ++n;
    }
    EXPECT_GE(n, 3);
}

TEST(Safetensors, Stories260kFixture) {
    CC_REQUIRE_FIXTURE("stories260k");
    SafetensorsFile f(test::fixture("stories260k") / "model.safetensors");
    ASSERT_EQ(f.tensors().size(), 47u);
    size_t n_params = 0;
    for (const auto& t : f.tensors()) {
        EXPECT_EQ(t.dtype, DType::f32) << t.name;
        n_params += t.n_bytes / 4;
    }
    EXPECT_EQ(n_params, 260032u);
    const TensorInfo* k = f.find("model.layers.3.self_attn.k_proj.weight");
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->shape, (std::vector<int64_t>{32, 64}));
}

}  // namespace
}  // namespace cc
