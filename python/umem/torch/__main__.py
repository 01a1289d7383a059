"""python -m umem.torch build: the allocator extension, ahead of time."""
import sys

from umem import _extension

sys.exit(_extension.main(sys.argv[1:]))
