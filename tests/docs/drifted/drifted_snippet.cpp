// docs/drifted.md#a-doc-whose-snippet-drifted (test input: the second block of the doc drifted)
int main() {
  int x = 1;
  int y = 2;
  int z = x + 2;
  return x + y + z;
}
