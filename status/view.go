package status

// statusData is what the template shows.
type statusData struct {
	Name, Source string
	Now          string
	Refresh      int // seconds; 0 for none
	Took         string
	Timeout      string
	RedisErr     string // the first read that failed, "" when none did
	Failed       int    // how many did
	Reads        int
	Refused      string // PageConfig.Refused's error, "" when none

	MaxTenants int
	Forget     string
	DenialSpan string

	Tenants   []tenantView
	Globals   []windowView
	Queues    []queueView
	Partial   bool // the counts cover only the first RetryTasks of a queue
	Listed    int  // PageConfig.RetryTasks
	Providers []providerView

	Fair      bool        // PageConfig.Lines holds some
	FairErr   string      // the lines were not read
	Lines     []linesView // by task type
	ShareSpan string
	FlowsCut  bool // the lines hold more waiting flows than a page reads
	MaxFlows  int  // statusFlows
	Shards    int  // how many shards' lines are read
}

// linesView is what waits in the fair lines of one task type.
type linesView struct {
	TaskType   string
	ByPriority []byCount // tasks in line at each priority that has any, most urgent first
	Flows      []flowView
}

type flowView struct {
	Tenant, Weight string
	Priority       int
	InLine, Grants int
	SharePct       int // of the task type's grants over the share span
}

type tenantView struct {
	Tenant   string
	LastSeen string
	Waiting  int
	NextBack string
	Rows     []windowView
	Errs     []string // reads of its windows that failed
	Global   bool     // its windows read are all of global rules
}

type windowView struct {
	TaskType, Rule, Scope, Tenant string
	Limit                         int  // an adaptive rule's limit in force
	Ceiling                       int  // an adaptive rule's ceiling; 0 for the others
	Cap                           bool // a concurrency rule: Limit in flight at once
	Window                        string
	Used, InLine                  int
	UsedPct, InLinePct            int
	Shadow                        bool   // mode: shadow: checked and counted, never holding a task back
	Level                         string // ok, busy (3/4 or more), full (no room)
	NextFree                      string
	Denials                       string
	Waiting                       int
	NextBack                      string
}

type queueView struct {
	Queue             string
	Throttled, Failed int
	Unread            int // tasks of the retry set not read (retryset.Head)
	ByRule            []byCount
	NextBack          string
	Err               string
}

type byCount struct {
	By    string
	Count int
}

type providerView struct {
	Provider               string
	Answers, TooMany       int
	AnswersTotal, TooTotal int
	LastTooMany            string
}
