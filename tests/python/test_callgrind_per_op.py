"""bench/callgrind_per_op.py (what bench/instructions-per-op.sh prints) on callgrind_annotate
--tree=caller text made up in its format: the loop's per-operation calls are summed and divided by
the operations; its warm-up and its rare calls are not counted."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                      "callgrind_per_op.py")

LOOP = "void alloc_free_single<umem_contender>(benchmark::State&)"
ANNOTATED = f"""\
 8,600,000 (40.0%)  < ???:{LOOP} (100,000x) [umem_bench]
   120,000 ( 0.5%)  < ???:warm_up_{LOOP} (1,000x) [umem_bench]
 8,720,000 (40.5%)  *  ???:umem::alloc::allocator::allocate(unsigned long) [libumem.so]

 8,200,000 (38.0%)  < ???:{LOOP} (100,000x) [umem_bench]
 8,200,000 (38.0%)  *  ???:umem::alloc::allocator::deallocate(void*) [libumem.so]

    90,000 ( 0.4%)  < ???:{LOOP} (30x) [umem_bench]
    90,000 ( 0.4%)  *  ???:umem::alloc::allocator::trim() [libumem.so]
"""


def run(text):
    return subprocess.run([sys.executable, SCRIPT], input=text, capture_output=True, text=True)


def test_instructions_per_operation_of_the_loop_s_calls():
    r = run(ANNOTATED)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "168"  # (8,600,000 + 8,200,000) / 100,000


def test_output_without_the_loop_is_an_error_that_says_so():
    r = run(" 1,000 (100.0%)  *  ???:main [umem_bench]\n")
    assert r.returncode != 0
    assert "no calls from the benchmark loop" in r.stderr
