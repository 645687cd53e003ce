/* bench/store_rows: the collector store alone, one SQLite row per record line (schema 2's
 * `events`) against one row per EVENTS batch (the lines of a batch in one BLOB, the experiment of
 * issue 3's third round). Same settings as src/collector/store.c for a new store: WAL,
 * synchronous=NORMAL, 8 KiB pages, 64 MiB cache; SQLite's own auto-checkpoint stands in for the
 * collector's checkpointer thread, so its copy of the WAL into the database is in the CPU time.
 * N lines of LEN bytes, 4 sandboxes interleaved, one transaction per batch of PER lines.
 *
 * Build and run (not part of `make`; numbers only, no verdict):
 *   cc -O2 -std=gnu17 -Wall -Wextra -o build/bench/store_rows bench/store_rows.c -lsqlite3
 *   build/bench/store_rows rows  [PER] [DB]   # one row per line
 *   build/bench/store_rows batch [PER] [DB]   # one row per batch
 * Prints rows/s (wall) and µs of process CPU per line. */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N   400000
#define LEN 624 /* with its '\n': bench/ingest's records are ~623 B per line */

static double now(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "store_rows: %s: %s\n", sql, err ? err : "?");
		sqlite3_free(err);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "rows") && strcmp(argv[1], "batch"))) {
		fprintf(stderr, "usage: store_rows rows|batch [PER] [DB]\n");
		return 2;
	}
	int batch = !strcmp(argv[1], "batch");
	int per = argc > 2 ? atoi(argv[2]) : 800;
	const char *path = argc > 3 ? argv[3] : "/tmp/store_rows.db";
	if (per < 1 || per > 65536) {
		fprintf(stderr, "store_rows: PER must be 1..65536\n");
		return 2;
	}
	char side[4096];
	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char *buf = malloc((size_t)per * LEN);
	int rc = 1;
	if (!buf || sqlite3_open(path, &db) != SQLITE_OK ||
	    exec(db, "PRAGMA page_size=8192; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
		     " PRAGMA cache_size=-65536;") < 0 ||
	    exec(db, batch
			 ? "CREATE TABLE event_batches(sandbox_id TEXT NOT NULL, first_seq INTEGER NOT NULL,"
			   " last_seq INTEGER NOT NULL, first_time_ns INTEGER NOT NULL, last_time_ns INTEGER"
			   " NOT NULL, received_ns INTEGER NOT NULL, lines BLOB NOT NULL,"
			   " PRIMARY KEY(sandbox_id, first_seq))"
			 : "CREATE TABLE events(sandbox_id TEXT NOT NULL, seq INTEGER NOT NULL, time_ns"
			   " INTEGER NOT NULL, class TEXT NOT NULL, received_ns INTEGER NOT NULL, line TEXT"
			   " NOT NULL, PRIMARY KEY(sandbox_id, seq)) WITHOUT ROWID") < 0 ||
	    sqlite3_prepare_v2(db,
			       batch ? "INSERT INTO event_batches VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)"
				     : "INSERT INTO events VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
			       -1, &st, NULL) != SQLITE_OK)
		goto out;
	char line[LEN];
	memset(line, 'x', sizeof(line));
	line[LEN - 1] = '\n';
	static const char *const sbx[4] = {
	    "0123456789abcdef0123456789abcde0", "0123456789abcdef0123456789abcde1",
	    "0123456789abcdef0123456789abcde2", "0123456789abcdef0123456789abcde3"};
	int64_t seq[4] = {0}, t = 1700000000000000000LL;
	double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
	for (long done = 0, k = 0; done < N; done += per, k++) {
		int s = (int)(k % 4);
		if (exec(db, "BEGIN") < 0)
			goto out;
		if (!batch) {
			for (int i = 0; i < per; i++) {
				seq[s]++;
				sqlite3_bind_text(st, 1, sbx[s], -1, SQLITE_STATIC);
				sqlite3_bind_int64(st, 2, seq[s]);
				sqlite3_bind_int64(st, 3, t + seq[s]);
				sqlite3_bind_text(st, 4, "file.open", -1, SQLITE_STATIC);
				sqlite3_bind_int64(st, 5, t);
				sqlite3_bind_text(st, 6, line, LEN - 1, SQLITE_STATIC);
				if (sqlite3_step(st) != SQLITE_DONE)
					goto out;
				sqlite3_reset(st);
			}
		} else {
			/* The collector would copy each line out of the frame (length-prefixed) too. */
			for (int i = 0; i < per; i++)
				memcpy(buf + (size_t)i * LEN, line, LEN);
			sqlite3_bind_text(st, 1, sbx[s], -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 2, seq[s] + 1);
			sqlite3_bind_int64(st, 3, seq[s] + per);
			sqlite3_bind_int64(st, 4, t + seq[s] + 1);
			sqlite3_bind_int64(st, 5, t + seq[s] + per);
			sqlite3_bind_int64(st, 6, t);
			sqlite3_bind_blob(st, 7, buf, per * LEN, SQLITE_STATIC);
			if (sqlite3_step(st) != SQLITE_DONE)
				goto out;
			sqlite3_reset(st);
			seq[s] += per;
		}
		if (exec(db, "COMMIT") < 0)
			goto out;
	}
	double w1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_PROCESS_CPUTIME_ID);
	printf("%s, %d lines per transaction: %.0f lines/s wall, %.2f us CPU per line\n",
	       batch ? "one row per batch" : "one row per line", per, N / (w1 - w0), (c1 - c0) * 1e6 / N);
	rc = 0;
out:
	if (rc && db)
		fprintf(stderr, "store_rows: %s\n", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(buf);
	return rc;
}
