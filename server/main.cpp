#include <cstdio>

int main() {
  std::puts("autocomp-mcp: not built yet");
  return 0;
}
