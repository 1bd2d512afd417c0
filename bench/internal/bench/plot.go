package bench

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotFile is one PNG that WriteFiles writes beside REPORT.md, and that
// the report embeds by its name.
type plotFile struct {
	name string // file name, relative to REPORT.md
	alt  string // the image's alternative text in the report
	draw func() ([][]*plot.Plot, vg.Length, vg.Length)
}

// plotFiles returns the plots of res: those of the sections it holds. The
// report links exactly these (see embedPlot).
func plotFiles(res *Results) []plotFile {
	var out []plotFile
	if lr := res.Limiter; lr != nil {
		for _, v := range lr.Variants {
			if len(v.Points) == 0 {
				continue
			}
			out = append(out, plotFile{
				name: "limiter-" + v.Name + ".png",
				alt:  "decisions per second against callers, " + v.Name + " variant, one line per contender",
				draw: func() ([][]*plot.Plot, vg.Length, vg.Length) {
					return [][]*plot.Plot{{limiterPlot(v)}}, 7 * vg.Inch, 4 * vg.Inch
				},
			})
		}
	}
	if dr := res.Drain; dr != nil && len(dr.Strategies) > 0 {
		for _, s := range dr.Strategies {
			if s.Name != "sluice" {
				continue
			}
			out = append(out, plotFile{
				name: "drain-sluice.png",
				alt:  "sluice: the most arrivals in one window, of the largest tenants and of all, against their limits",
				draw: func() ([][]*plot.Plot, vg.Length, vg.Length) {
					return [][]*plot.Plot{{drainTenantsPlot(dr, s)}, {drainGlobalPlot(dr, s, dr.drainSeconds())}}, 8 * vg.Inch, 7 * vg.Inch
				},
			})
		}
		out = append(out, plotFile{
			name: "drain-strategies.png",
			alt:  "the most arrivals of all tenants in one window against the provider limit, one panel per strategy",
			draw: func() ([][]*plot.Plot, vg.Length, vg.Length) {
				var rows [][]*plot.Plot
				for _, s := range dr.Strategies {
					rows = append(rows, []*plot.Plot{drainGlobalPlot(dr, s, dr.drainSeconds())})
				}
				return rows, 8 * vg.Inch, vg.Length(len(rows)) * 3 * vg.Inch
			},
		})
	}
	return out
}

// reportLimiterPlots embeds the limiter section's plots, one per variant.
func reportLimiterPlots(w io.Writer, res *Results) {
	if res.Limiter == nil {
		return
	}
	for _, v := range res.Limiter.Variants {
		embedPlot(w, res, "limiter-"+v.Name+".png")
	}
}

// embedPlot writes the Markdown image of the plot named name when res has
// it.
func embedPlot(w io.Writer, res *Results, name string) {
	for _, p := range plotFiles(res) {
		if p.name == name {
			fmt.Fprintf(w, "\n![%s](%s)\n", p.alt, p.name)
		}
	}
}

// writePlots writes the plots of res to dir as PNG.
func writePlots(dir string, res *Results) error {
	for _, pf := range plotFiles(res) {
		rows, width, height := pf.draw()
		img := vgimg.New(width, height)
		dc := draw.New(img)
		tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6),
			PadLeft: vg.Points(6), PadRight: vg.Points(12), PadY: vg.Points(18)}
		canvases := plot.Align(rows, tiles, dc)
		for i, row := range rows {
			row[0].Draw(canvases[i][0])
		}
		f, err := os.Create(filepath.Join(dir, pf.name))
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("bench: plot %s: %w", pf.name, err)
		}
	}
	return nil
}

// namedMeasurement is one contender's measurements at a Point.
type namedMeasurement struct {
	name string
	m    Measurement
}

// pointMeasurements returns the contenders measured at p: every field of
// Point that is a Measurement holding rounds, or a non-nil *Measurement,
// named by its JSON key, in field order. It reads the fields by reflection
// so that a contender added to Point is plotted without a change here.
func pointMeasurements(p Point) []namedMeasurement {
	var out []namedMeasurement
	v := reflect.ValueOf(p)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		var m Measurement
		switch x := v.Field(i).Interface().(type) {
		case Measurement:
			m = x
		case *Measurement:
			if x == nil {
				continue
			}
			m = *x
		default:
			continue
		}
		if len(m.Rounds) == 0 {
			continue
		}
		out = append(out, namedMeasurement{name, m})
	}
	return out
}

// limiterPlot draws decisions per second against callers, one line per
// contender, for one variant.
func limiterPlot(v Variant) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Limiter, %s variant: decisions per second (median of the rounds)", v.Name)
	p.X.Label.Text = "concurrent callers"
	p.Y.Label.Text = "decisions per second"
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, pt := range v.Points {
		ticks = append(ticks, plot.Tick{Value: float64(pt.Callers), Label: strconv.Itoa(pt.Callers)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min = 0
	p.Y.Tick.Marker = thousandsTicks{}
	p.Legend.Top, p.Legend.Left = true, true

	lines := map[string]plotter.XYs{}
	var names []string
	for _, pt := range v.Points {
		for _, nm := range pointMeasurements(pt) {
			if _, ok := lines[nm.name]; !ok {
				names = append(names, nm.name)
			}
			lines[nm.name] = append(lines[nm.name], plotter.XY{X: float64(pt.Callers), Y: nm.m.Median.PerSecond})
		}
	}
	var top float64
	for i, name := range names {
		for _, xy := range lines[name] {
			top = max(top, xy.Y)
		}
		l, s, err := plotter.NewLinePoints(lines[name])
		if err != nil {
			continue // no finite point: nothing to draw
		}
		l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		s.Shape = plotutil.Shape(i)
		p.Add(l, s)
		p.Legend.Add(name, l, s)
	}
	p.Y.Max = top * (1.1 + 0.06*float64(len(names))) // room for the legend
	return p
}

// drainSeconds is the time the drain plots span: the longest series.
func (dr *DrainResult) drainSeconds() float64 {
	var end float64
	for _, s := range dr.Strategies {
		end = max(end, float64(len(s.Series.Global)-1)*s.Series.StepMs/1000)
	}
	return end
}

// drainGlobalPlot draws the arrivals of all tenants in the last window
// against the provider limit, for strategy s, over span seconds.
func drainGlobalPlot(dr *DrainResult, s DrainStrategy, span float64) *plot.Plot {
	p := drainPlot(fmt.Sprintf("%s: all tenants, arrivals at the provider per %v window", s.Name, seconds(dr.WindowSeconds)), s, span)
	addSeries(p, "all tenants", s.Series.Global, s.Series.StepMs, 0)
	addLimit(p, fmt.Sprintf("provider limit, %d", dr.ProviderLimit), dr.ProviderLimit, span)
	return p
}

// drainTenantsPlot draws the arrivals of the largest tenants in the last
// window against the tenant limit, for strategy s.
func drainTenantsPlot(dr *DrainResult, s DrainStrategy) *plot.Plot {
	p := drainPlot(fmt.Sprintf("%s: the %d largest tenants, arrivals at the provider per %v window", s.Name, len(s.Series.Tenants), seconds(dr.WindowSeconds)), s, dr.drainSeconds())
	for i, ts := range s.Series.Tenants {
		addSeries(p, fmt.Sprintf("%s (%d tasks)", ts.Tenant, ts.Tasks), ts.Counts, s.Series.StepMs, i)
	}
	addLimit(p, fmt.Sprintf("tenant limit, %d", dr.TenantLimit), dr.TenantLimit, dr.drainSeconds())
	p.Y.Max *= 1 + 0.07*float64(len(s.Series.Tenants)) // room for the legend
	return p
}

// drainPlot is the frame of a drain plot.
func drainPlot(title string, s DrainStrategy, span float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds since the workers started"
	p.Y.Label.Text = "most arrivals in one window"
	p.X.Min, p.X.Max = 0, max(span, 1)
	p.Y.Min = 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// addSeries adds one line of samples every stepMs.
func addSeries(p *plot.Plot, name string, counts []int, stepMs float64, i int) {
	if len(counts) == 0 {
		return
	}
	xys := make(plotter.XYs, len(counts))
	for k, c := range counts {
		xys[k] = plotter.XY{X: float64(k) * stepMs / 1000, Y: float64(c)}
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return
	}
	l.Color = plotutil.Color(i)
	l.Width = vg.Points(1.2)
	p.Add(l)
	p.Legend.Add(name, l)
	p.Y.Max = max(p.Y.Max, float64(slices.Max(counts))*1.1)
}

// addLimit adds a dashed horizontal line at limit.
func addLimit(p *plot.Plot, name string, limit int, span float64) {
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(limit)}, {X: max(span, 1), Y: float64(limit)}})
	if err != nil {
		return
	}
	l.Color = color.Black
	l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	p.Y.Max = max(p.Y.Max, float64(limit)*1.25)
}

// thousandsTicks are gonum's default ticks labelled with thousands
// separators: 40,000 rather than 40000.
type thousandsTicks struct{}

func (thousandsTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = thousands(ticks[i].Value)
		}
	}
	return ticks
}
