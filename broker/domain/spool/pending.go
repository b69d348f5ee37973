package spool

import "sync"

// pending counts the records not pushed yet, by tenant and in all.
type pending struct {
	mu       sync.Mutex
	all      int64
	byTenant map[string]int64
}

func (p *pending) add(tenant string, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byTenant == nil {
		p.byTenant = map[string]int64{}
	}
	p.all += n
	if p.byTenant[tenant] += n; p.byTenant[tenant] == 0 {
		delete(p.byTenant, tenant)
	}
}

func (p *pending) addAll(recs []Record, sign int64) {
	for _, r := range recs {
		p.add(r.Tenant, sign)
	}
}

func (p *pending) of(tenant string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byTenant[tenant]
}

func (p *pending) total() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.all
}
