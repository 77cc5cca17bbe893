#include "bounds.h"
void bd_gc(int scale) { (void)scale; }
