// docs/bad.md: no cpp blocks; the doc exists only for its link.
int main() { return 0; }
