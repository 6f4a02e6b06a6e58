// Consumer check (add_subdirectory): the umbrella header compiles and links from outside the tree.
#include <vbucket/vbucket.hpp>

#include <cstdio>  // std::puts

int main() {
  try {
    throw vbucket::error("consumer ok");
  } catch (const vbucket::error& e) {
    std::puts(e.what());
    return 0;
  }
  return 1;
}
