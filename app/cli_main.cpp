#include <cstdio>

int main() {
    std::puts("contextcache-cli: under construction");
    return 0;
}
