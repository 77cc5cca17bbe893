void hk__stats_stub(void);
void hk__stats_stub(void) {}
