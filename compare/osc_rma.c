/* The MPI side of onesided's comparisons: the OSU one-sided timed loops for 8-byte put with
 * -s lock, -s lock_all, -s flush and -s pscw (2 ranks); inside one shared lock, get, 4 KiB put
 * and get, compare-and-swap, fetch-and-op, accumulate (a long, MPI_SUM) and vector accumulates
 * (MPI_SUM of 4 KiB of ints: acc4k, as `onesided bench acc_latency -T int -m 4K:4K`; of 64 KiB
 * of floats: acc64k, as `-T float -m 64K:64K`), each with a flush;
 * and a fence latency over N ranks, written
 * against plain MPI so that `mpirun --mca osc sm` measures Open MPI's shared-memory RMA the way
 * `onesided bench` measures onesided. Prints `test ranks us` lines; see compare/README.md.
 *
 * Usage: osc_rma lock|lock_all|flush|get|flush4k|get4k|cas|fop|acc|acc4k|acc64k|pscw|fence ITERS WARMUP
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of the window and of the origin buffer: the largest transfer, acc64k's. */
#define BUF 65536

static double loop(const char *test, MPI_Win win, int rank, int size, long iters, char *buf)
{
    double start = 0;
    if (!strcmp(test, "fence")) {
        MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
        start = MPI_Wtime();
        for (long i = 0; i < iters; i++)
            MPI_Win_fence(0, win);
        double t = MPI_Wtime() - start;
        MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
        return t;
    }
    if (!strcmp(test, "pscw")) {
        /* OSU's pscw latency: a round trip of epochs, the time halved by the caller. */
        MPI_Group world, peer;
        int other = 1 - rank;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_incl(world, 1, &other, &peer);
        start = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            if (rank == 0) {
                MPI_Win_start(peer, 0, win);
                MPI_Put(buf, 8, MPI_CHAR, other, 0, 8, MPI_CHAR, win);
                MPI_Win_complete(win);
                MPI_Win_post(peer, 0, win);
                MPI_Win_wait(win);
            } else {
                MPI_Win_post(peer, 0, win);
                MPI_Win_wait(win);
                MPI_Win_start(peer, 0, win);
                MPI_Put(buf, 8, MPI_CHAR, other, 0, 8, MPI_CHAR, win);
                MPI_Win_complete(win);
            }
        }
        double t = MPI_Wtime() - start;
        MPI_Group_free(&peer);
        MPI_Group_free(&world);
        return t / 2;
    }
    if (rank == 0) {
        /* Every test but lock and lock_all runs inside one shared lock, as OSU's -s flush. */
        int epoch = strcmp(test, "lock") && strcmp(test, "lock_all");
        long one = 1, old = 0, compare = 0;
        if (epoch)
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        start = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            if (!strcmp(test, "lock")) {
                MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
                MPI_Put(buf, 8, MPI_CHAR, 1, 0, 8, MPI_CHAR, win);
                MPI_Win_unlock(1, win);
            } else if (!strcmp(test, "lock_all")) {
                MPI_Win_lock_all(0, win);
                MPI_Put(buf, 8, MPI_CHAR, 1, 0, 8, MPI_CHAR, win);
                MPI_Win_unlock_all(win);
            } else if (!strcmp(test, "get")) {
                MPI_Get(buf, 8, MPI_CHAR, 1, 0, 8, MPI_CHAR, win);
                MPI_Win_flush(1, win);
            } else if (!strcmp(test, "flush4k")) {
                MPI_Put(buf, 4096, MPI_CHAR, 1, 0, 4096, MPI_CHAR, win);
                MPI_Win_flush(1, win);
            } else if (!strcmp(test, "get4k")) {
                MPI_Get(buf, 4096, MPI_CHAR, 1, 0, 4096, MPI_CHAR, win);
                MPI_Win_flush(1, win);
            } else if (!strcmp(test, "cas")) {
                MPI_Compare_and_swap(&one, &compare, &old, MPI_LONG, 1, 0, win);
                MPI_Win_flush(1, win);
            } else if (!strcmp(test, "fop")) {
                MPI_Fetch_and_op(&one, &old, MPI_LONG, 1, 0, MPI_SUM, win);
                MPI_Win_flush(1, win);
            } else if (!strcmp(test, "acc")) {
                MPI_Accumulate(&one, 1, MPI_LONG, 1, 0, 1, MPI_LONG, MPI_SUM, win);
                MPI_Win_flush(1, win);
            } else if (!strcmp(test, "acc4k")) {
                int n = 4096 / sizeof(int);
                MPI_Accumulate(buf, n, MPI_INT, 1, 0, n, MPI_INT, MPI_SUM, win);
                MPI_Win_flush(1, win);
            } else if (!strcmp(test, "acc64k")) {
                int n = BUF / sizeof(float);
                MPI_Accumulate(buf, n, MPI_FLOAT, 1, 0, n, MPI_FLOAT, MPI_SUM, win);
                MPI_Win_flush(1, win);
            } else {
                MPI_Put(buf, 8, MPI_CHAR, 1, 0, 8, MPI_CHAR, win);
                MPI_Win_flush(1, win);
            }
        }
        double t = MPI_Wtime() - start;
        if (epoch)
            MPI_Win_unlock(1, win);
        return t;
    }
    (void)size;
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 4) {
        fprintf(stderr, "usage: osc_rma lock|lock_all|flush|get|flush4k|get4k|cas|fop|acc|acc4k|acc64k|pscw|fence ITERS WARMUP\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *test = argv[1];
    long iters = atol(argv[2]), warmup = atol(argv[3]);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char *base;
    MPI_Win win;
    MPI_Win_allocate(BUF, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    static char buf[BUF] = {1, 2, 3, 4, 5, 6, 7, 8};
    loop(test, win, rank, size, warmup, buf);
    MPI_Barrier(MPI_COMM_WORLD);
    double t = loop(test, win, rank, size, iters, buf);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s %d %.3f\n", test, size, t * 1e6 / iters);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
