/*
 * copy.c - copy a file without flooding the page cache, through libdontcache.
 *
 *   cc -o copy examples/copy.c $(pkg-config --cflags --libs dontcache)
 *   DONTCACHE_POLICY=flusher ./copy SRC DST
 *
 * Prints the handle's counters; exits 1 on any error, naming it.
 */
#include <dontcache.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	static char buf[1 << 20];
	struct dc_opts opts;
	struct dc_stats st;
	dc_handle *in, *out;
	ssize_t n;

	if (argc != 3) {
		fprintf(stderr, "usage: %s SRC DST\n", argv[0]);
		return 2;
	}
	if (dc_opts_init(&opts)) {
		fprintf(stderr, "copy: bad DONTCACHE_* variable: %s\n", strerror(errno));
		return 2;
	}
	in = dc_open(argv[1], O_RDONLY, 0, &opts);
	if (!in) {
		fprintf(stderr, "copy: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	out = dc_open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644, &opts);
	if (!out) {
		fprintf(stderr, "copy: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	while ((n = dc_read(in, buf, sizeof(buf))) > 0) {
		for (ssize_t done = 0; done < n;) {
			ssize_t w = dc_write(out, buf + done, n - done);
			if (w < 0) {
				fprintf(stderr, "copy: writing %s: %s\n", argv[2], strerror(errno));
				return 1;
			}
			done += w;
		}
	}
	if (n < 0) {
		fprintf(stderr, "copy: reading %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	dc_stats(out, &st);
	printf("policy=%s written=%llu written_back=%llu dropped=%llu kicks=%llu coalesced=%llu\n",
	       dc_policy_name(opts.policy), (unsigned long long)st.bytes_written,
	       (unsigned long long)st.bytes_written_back, (unsigned long long)st.bytes_dropped,
	       (unsigned long long)st.kicks, (unsigned long long)st.coalesced_kicks);
	dc_close(in);
	if (dc_close(out)) {
		fprintf(stderr, "copy: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	return 0;
}
