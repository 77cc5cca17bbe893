/* tests/tools/static_prog.c - a statically linked program (heapkit record refuses it). */
int main(void) { return 0; }
