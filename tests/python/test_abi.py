"""umem_torch.h is the one list of libumem_torch.so's C ABI: the ctypes table (umem._lib.SIGNATURES),
the extensions' table (UMEM_LIBRARY_FUNCTIONS) and the library's exports must match it. Each test fails naming the
functions missing, extra or typed otherwise."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

import umem._lib as L

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
HEADER = os.path.join(ROOT, "torch_bridge", "include", "umem", "umem_torch.h")
# The table of the library's functions both extensions take at install().
EXTENSION_TABLE = os.path.join(ROOT, "torch_bridge", "extension", "library_functions.hpp")

# The ctypes type each C type of the header is declared with. A returned char* is a string the
# caller frees (umem_torch_string_free), so ctypes must keep it an address; const char* is not.
_ARGUMENTS = {
    "int": ctypes.c_int, "unsigned": ctypes.c_uint, "double": ctypes.c_double,
    "size_t": ctypes.c_size_t, "ssize_t": ctypes.c_ssize_t, "uint64_t": ctypes.c_uint64,
    "const char*": ctypes.c_char_p, "char*": ctypes.c_void_p, "void*": ctypes.c_void_p,
    "const void*": ctypes.c_void_p, "void**": ctypes.POINTER(ctypes.c_void_p),
    "size_t*": ctypes.POINTER(ctypes.c_size_t), "double*": ctypes.POINTER(ctypes.c_double),
    "umem_torch_device_stats*": ctypes.c_void_p,
    "const umem_torch_event_provider*": ctypes.c_void_p,
    "umem_torch_segment_visitor": ctypes.c_void_p,
}
_RESULTS = {"void": None, "umem_status": ctypes.c_int, "int": ctypes.c_int,
            "char*": ctypes.c_void_p, "void*": ctypes.c_void_p, "const char*": ctypes.c_char_p}


def _type(text):
    return re.sub(r"\s*\*", "*", " ".join(text.split()))


def header_functions():
    """{name: (result type, [argument types])} as the header writes them."""
    text = open(HEADER).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    functions = {}
    for m in re.finditer(r"^([A-Za-z_][\w \t*]*?)\b(umem_torch_\w+)\s*\(([^()]*)\)\s*;", text, re.M):
        params = [] if m.group(3).strip() == "void" else m.group(3).split(",")
        types = [_type(re.sub(r"\b\w+\s*$", "", p)) for p in params]  # without the names
        functions[m.group(2)] = (_type(m.group(1)), types)
    return functions


def test_the_header_declares_functions():
    functions = header_functions()
    assert len(functions) > 30, sorted(functions)
    assert functions["umem_torch_read_file"] == (
        "umem_status", ["const char*", "uint64_t", "uint64_t", "void*", "int", "unsigned", "int"])
    assert functions["umem_torch_capture_begin"] == ("void", [])


def test_the_ctypes_table_is_the_header():
    header = header_functions()
    table = L.SIGNATURES
    missing = sorted(set(header) - set(table))
    extra = sorted(set(table) - set(header))
    assert not missing and not extra, f"umem._lib.SIGNATURES lacks {missing}, adds {extra}"
    different = []
    for name, (result, arguments) in header.items():
        unknown = [t for t in [result] if t not in _RESULTS] + \
                  [t for t in arguments if t not in _ARGUMENTS]
        assert not unknown, f"{name}: no ctypes type known for {unknown} (add it to test_abi.py)"
        expected = (_RESULTS[result], [_ARGUMENTS[t] for t in arguments])
        if tuple(table[name]) != expected:
            different.append(f"{name}: header {result}({', '.join(arguments)}), "
                             f"ctypes {table[name]}")
    assert not different, "typed otherwise than umem_torch.h: " + "; ".join(different)


def test_the_extensions_call_only_header_functions():
    text = open(EXTENSION_TABLE).read()
    table = re.search(r"#define UMEM_LIBRARY_FUNCTIONS\(X\)((?:[^\n]*\\\n)*[^\n]*)", text)
    assert table, "no UMEM_LIBRARY_FUNCTIONS table in library_functions.hpp"
    names = re.findall(r"X\((\w+)\)", table.group(1))
    # What each extension calls first: the GPU one's allocation, the CPU one's.
    assert {"umem_torch_extension_alloc", "umem_torch_host_malloc"} <= set(names), names
    unknown = sorted(set(names) - set(header_functions()))
    assert not unknown, f"UMEM_LIBRARY_FUNCTIONS names functions umem_torch.h lacks: {unknown}"


@pytest.mark.skipif(shutil.which("nm") is None, reason="no nm to list the library's exports")
def test_the_library_exports_the_header():
    path = L.library_path()
    if not os.path.exists(path):
        pytest.skip(f"libumem_torch.so is not built ({path})")
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if " T " in line}
    header = set(header_functions())
    assert exported == header, (f"libumem_torch.so lacks {sorted(header - exported)}, "
                                f"exports beyond umem_torch.h {sorted(exported - header)}")
