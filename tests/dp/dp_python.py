"""tests/dp/dp_python.py — the Python binding's data parallelism under `mpirun -np 2` with
mpi4py (tests/dp/test_dp_python.sh): dlcc.Comm over MPI.COMM_WORLD (or MPI's world without an
mpi4py communicator, `--world`), Session.bind_comm, train steps on each rank's half of every
global batch, params identical on both ranks after every step (checked with mpi4py), the
deterministic all-reduce and broadcast, the loss reduced with the gradients (the same on every
rank), and the communication figures.
usage: dp_python.py MODEL.dlg [--world]"""

import sys

import numpy as np
from mpi4py import MPI

import dlcc

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
comm = dlcc.Comm(None if "--world" in sys.argv else world, timeout=60)
assert (comm.rank, comm.size) == (rank, size), (comm.rank, comm.size, rank, size)

a = np.arange(6, dtype=np.float32) * (rank + 1)
comm.allreduce(a, scale=1.0 / size)
want = np.arange(6, dtype=np.float32) * (sum(range(1, size + 1)) / size)
assert np.array_equal(a, want.astype(np.float32)), a
b = np.full(3, rank, dtype=np.int64)
comm.broadcast(b, root=size - 1)
assert list(b) == [size - 1] * 3, b
comm.barrier()

model = dlcc.compile(sys.argv[1], dims={"N": 16})
s = model.session(threads=1)
s.bind_comm(comm, bucket_bytes=1 << 18)
rng = np.random.default_rng(7)
for t in range(3):
    x = rng.random((16 * size, 784), dtype=np.float32)  # the same global batch on every rank
    y = rng.integers(0, 10, 16 * size).astype(np.int64)
    info = s.train_step(x=x[16 * rank:16 * rank + 16].copy(), y=y[16 * rank:16 * rank + 16].copy())
    params = b"".join(s.params[n].tobytes() for n in ("w1", "b1", "w2", "b2"))
    same = all(p == params for p in world.allgather(params))
    same = same and len(set(world.allgather(info.loss))) == 1  # the global batch's loss on all
    if rank == 0:
        print(f"step {t + 1} loss {info.loss:.6f} grad_norm {info.grad_norm:.6f} "
              f"{'ranks identical' if same else 'RANKS DIFFER'}")
    assert same
st = s.comm_stats()
if rank == 0:
    print(f"comm: {st['buckets']} buckets, {st['bytes']} bytes per step")
assert st["buckets"] == 2 and st["bytes"] == 814124, st  # the gradients and the loss
s.close()
comm.close()
if rank == 0:
    print("ok")
