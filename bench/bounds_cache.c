#include "bounds.h"
void bd_cache(int scale) { (void)scale; }
