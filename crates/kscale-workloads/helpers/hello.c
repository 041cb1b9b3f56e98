/*
 * The program `syscall.fork_exec` and `syscall.fork_sh` start: it does as
 * little as a real program can (one write, then exit), so that the figure is
 * the cost of fork + execve + exit + wait rather than of any work. Built
 * statically by build.rs so that no dynamic loader runs (SPEC §4.1).
 */
#include <unistd.h>

int main(void)
{
	static const char msg[] = "Hello world\n";
	ssize_t r = write(1, msg, sizeof msg - 1);

	(void)r;
	return 0;
}
