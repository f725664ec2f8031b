#!/usr/bin/python3
"""Trains samples/mlp_fmnist.dlg on Fashion-MNIST through the dlcc Python binding, the way
`dlcc train samples/mlp_fmnist.dlg --dataset fashion-mnist` does: pixels x/255 normalised with
the mean and standard deviation of the training samples used, a new seeded random order every
epoch, full batches (the final partial batch is dropped), one compiled train step per batch,
then the test set classified by the infer entry point (argmax of `probs`).

Prints per epoch 'epoch E: mean loss L, T s, S samples/s, skipped K' and at the end
'test accuracy: A (CORRECT/TOTAL)'.

    DLCC_BUILD_DIR=build /usr/bin/python3 samples/train_fmnist.py --epochs 1 --threads 1

$DLCC_FMNIST_LIMIT (or --limit-train N) uses only the first N training samples, and
$DLCC_FMNIST_TEST_LIMIT (or --limit-test N) the first N test samples (for quick tests).
"""

import argparse
import gzip
import os
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))
import dlcc  # noqa: E402


def read_idx(path):
    """An IDX file (plain or gzip) as an ndarray (uint8 data only, as Fashion-MNIST's)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of uint8")
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.path.join(_HERE, "mlp_fmnist.dlg"))
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--limit-train", type=int, default=int(os.environ.get("DLCC_FMNIST_LIMIT", 0)))
    ap.add_argument(
        "--limit-test", type=int, default=int(os.environ.get("DLCC_FMNIST_TEST_LIMIT", 0))
    )
    ap.add_argument("--save", default=None, help="write a safetensors checkpoint at the end")
    args = ap.parse_args()

    d = args.data
    x_train = read_idx(os.path.join(d, "train-images-idx3-ubyte.gz"))
    y_train = read_idx(os.path.join(d, "train-labels-idx1-ubyte.gz"))
    x_test = read_idx(os.path.join(d, "t10k-images-idx3-ubyte.gz"))
    y_test = read_idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz"))
    if args.limit_train > 0:
        x_train, y_train = x_train[: args.limit_train], y_train[: args.limit_train]
    if args.limit_test > 0:
        x_test, y_test = x_test[: args.limit_test], y_test[: args.limit_test]

    # x/255, then normalised with the training samples' mean and population std.
    xt = x_train.reshape(len(x_train), -1).astype(np.float32) / np.float32(255)
    mean = float(xt.mean(dtype=np.float64))
    std = float(xt.std(dtype=np.float64)) or 1.0
    xt = (xt - np.float32(mean)) / np.float32(std)
    xv = x_test.reshape(len(x_test), -1).astype(np.float32) / np.float32(255)
    xv = (xv - np.float32(mean)) / np.float32(std)
    yt = y_train.astype(np.int64)
    yv = y_test.astype(np.int64)

    B = args.batch
    model = dlcc.compile(args.model, dims={"N": B})
    s = model.session(threads=args.threads)
    if args.lr is not None:
        s.set_hparam("lr", args.lr)
    n_batches = len(xt) // B
    if n_batches == 0:
        sys.exit(f"train_fmnist: {len(xt)} training samples make no batch of {B}")
    print(
        f"model {model.name}: {len(xt)} training samples, {n_batches} batches of {B}, "
        f"{s.threads} threads",
        flush=True,
    )

    rng = np.random.default_rng(args.seed)
    for epoch in range(args.epochs):
        t0 = time.perf_counter()
        perm = rng.permutation(len(xt))
        total, skipped = 0.0, 0
        for b in range(n_batches):
            idx = perm[b * B : (b + 1) * B]
            info = s.train_step(x=xt[idx], y=yt[idx])
            total += info.loss
            skipped += int(info.skipped)
        dt = time.perf_counter() - t0
        print(
            f"epoch {epoch + 1}: mean loss {total / n_batches:.4f}, {dt:.2f} s, "
            f"{n_batches * B / dt:.0f} samples/s, skipped {skipped}",
            flush=True,
        )

    # Test: full batches, the last one padded with zeros (only its real rows count).
    correct = 0
    xb = np.zeros((B, xv.shape[1]), dtype=np.float32)
    yb = np.zeros(B, dtype=np.int64)
    for start in range(0, len(xv), B):
        n = min(B, len(xv) - start)
        xb[:n] = xv[start : start + n]
        xb[n:] = 0
        yb[:n] = yv[start : start + n]
        yb[n:] = 0
        probs = s.infer(copy=False, x=xb, y=yb)["probs"]
        correct += int((probs[:n].argmax(axis=1) == yv[start : start + n]).sum())
    print(f"test accuracy: {correct / len(xv):.4f} ({correct}/{len(xv)})", flush=True)
    if args.save:
        s.save(args.save)


if __name__ == "__main__":
    main()
