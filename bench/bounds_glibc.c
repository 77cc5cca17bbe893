#include "bounds.h"
void bd_glibc(int scale) { (void)scale; }
