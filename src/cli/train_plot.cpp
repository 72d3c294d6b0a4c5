// curves.png through cairo: two panels (loss, accuracy) with round ticks on both axes, axis
// labels, a legend, and value axes fitted to the finite data.
#include "cli/train_plot.hpp"

#ifdef FLAXPP_WITH_CAIRO

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>

#include "flaxpp/core/error.hpp"
#include "flaxpp/io/checkpoint.hpp"

namespace flaxpp::cli {
namespace {

struct Rgb {
  double r, g, b;
};
constexpr Rgb kTrainColour{0.122, 0.467, 0.706};  // matplotlib's tab:blue
constexpr Rgb kTestColour{1.0, 0.498, 0.055};     // tab:orange
constexpr Rgb kInk{0.15, 0.15, 0.15};
constexpr Rgb kGrid{0.88, 0.88, 0.88};

// An axis range whose ends are multiples of a round step (1, 2 or 5 times a power of ten, at
// least `min_step`), the step giving the number of intervals closest to `target`.
struct Ticks {
  double lo, hi, step;
  int decimals;  // enough to tell the tick labels apart
};

Ticks round_ticks(double lo, double hi, int target, double min_step) {
  if (!(hi > lo)) {  // one value (or none): a window around it
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double magnitude = std::pow(10.0, std::floor(std::log10((hi - lo) / target)));
  Ticks best{0, 0, 0, 0};
  double best_miss = std::numeric_limits<double>::infinity();
  for (const double scale : {0.1, 1.0, 10.0})
    for (const double m : {1.0, 2.0, 5.0}) {
      const double step = m * scale * magnitude;
      if (step < min_step) continue;
      const double t_lo = std::floor(lo / step + 1e-9) * step;
      const double t_hi = std::ceil(hi / step - 1e-9) * step;
      const double miss = std::abs((t_hi - t_lo) / step - target);
      if (miss <= best_miss) {  // ties go to the larger step
        best = {t_lo, t_hi, step,
                static_cast<int>(std::max(0.0, -std::floor(std::log10(step) + 1e-9)))};
        best_miss = miss;
      }
    }
  if (best.step == 0) {  // min_step above every candidate (a tiny range of whole epochs)
    best = {std::floor(lo / min_step) * min_step, std::ceil(hi / min_step) * min_step, min_step, 0};
    if (best.hi == best.lo) best.hi += min_step;
  }
  return best;
}

struct Series {
  const char* name;
  Rgb colour;
  std::function<float(const EpochMetrics&)> value;
};

class Canvas {
 public:
  Canvas(int width, int height)
      : surface_(cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height),
                 cairo_surface_destroy),
        cr_(cairo_create(surface_.get()), cairo_destroy) {
    cairo_set_source_rgb(cr(), 1, 1, 1);
    cairo_paint(cr());
    cairo_select_font_face(cr(), "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  }
  cairo_t* cr() const { return cr_.get(); }

  void colour(Rgb c) const { cairo_set_source_rgb(cr(), c.r, c.g, c.b); }
  void line(double x0, double y0, double x1, double y1, Rgb c, double width) const {
    colour(c);
    cairo_set_line_width(cr(), width);
    cairo_move_to(cr(), x0, y0);
    cairo_line_to(cr(), x1, y1);
    cairo_stroke(cr());
  }
  // Text anchored at (x, y): ax/ay in [0, 1] pick the point of its box (0, 0: top left).
  void text(const std::string& s, double x, double y, double ax, double ay, double size, Rgb c,
            bool bold = false, double angle = 0) const {
    cairo_save(cr());
    cairo_select_font_face(cr(), "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr(), size);
    cairo_text_extents_t e;
    cairo_text_extents(cr(), s.c_str(), &e);
    cairo_translate(cr(), x, y);
    cairo_rotate(cr(), angle);
    colour(c);
    cairo_move_to(cr(), -e.x_bearing - ax * e.width, -e.y_bearing - ay * e.height);
    cairo_show_text(cr(), s.c_str());
    cairo_restore(cr());
  }

  std::string png() const {
    std::string bytes;
    const auto append = [](void* closure, const unsigned char* data, unsigned int length) {
      static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
      return CAIRO_STATUS_SUCCESS;
    };
    cairo_surface_flush(surface_.get());
    const cairo_status_t status =
        cairo_status(cr()) != CAIRO_STATUS_SUCCESS
            ? cairo_status(cr())
            : cairo_surface_write_to_png_stream(surface_.get(), append, &bytes);
    if (status != CAIRO_STATUS_SUCCESS)
      throw Error(detail::str("drawing curves.png failed: ", cairo_status_to_string(status)));
    return bytes;
  }

 private:
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface_;
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr_;
};

std::string tick_label(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

// One panel in the box (x0, y0)-(x0 + w, y0 + h), its plot area inset for the labels.
void panel(const Canvas& c, double x0, double y0, double w, double h, const std::string& title,
           const std::string& y_label, const std::vector<EpochMetrics>& rows,
           const std::vector<Series>& series, std::optional<double> y_max) {
  const double left = x0 + 72, right = x0 + w - 16, top = y0 + 44, bottom = y0 + h - 52;
  // Ranges from the finite values only.
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& s : series)
    for (const auto& r : rows)
      if (const double v = s.value(r); std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
  const bool any = std::isfinite(lo);
  if (!any) lo = hi = 0;
  Ticks ty = round_ticks(lo, hi, 5, 0);
  if (y_max) ty.hi = std::min(ty.hi, *y_max);
  const std::int64_t last_epoch = rows.empty() ? 1 : rows.back().epoch;
  const Ticks tx = round_ticks(0, static_cast<double>(last_epoch), 6, 1);
  auto px = [&](double e) { return left + (e - tx.lo) / (tx.hi - tx.lo) * (right - left); };
  auto py = [&](double v) { return bottom - (v - ty.lo) / (ty.hi - ty.lo) * (bottom - top); };

  c.text(title, (left + right) / 2, y0 + 14, 0.5, 0, 16, kInk, true);
  for (double v = ty.lo; v <= ty.hi + ty.step * 1e-6; v += ty.step) {
    c.line(left, py(v), right, py(v), kGrid, 1);
    c.text(tick_label(v, ty.decimals), left - 8, py(v), 1, 0.5, 12, kInk);
  }
  for (double e = tx.lo; e <= tx.hi + 1e-6; e += tx.step) {
    c.line(px(e), bottom, px(e), bottom + 5, kInk, 1);
    c.text(tick_label(e, 0), px(e), bottom + 9, 0.5, 0, 12, kInk);
  }
  c.line(left, bottom, right, bottom, kInk, 1.2);
  c.line(left, top, left, bottom, kInk, 1.2);
  c.text("epoch", (left + right) / 2, y0 + h - 6, 0.5, 1, 13, kInk);
  c.text(y_label, x0 + 14, (top + bottom) / 2, 0.5, 0.5, 13, kInk, false, -M_PI / 2);
  std::size_t nonfinite = 0;
  for (const auto& s : series)
    for (const auto& r : rows)
      nonfinite += !std::isfinite(s.value(r));
  if (!any) c.text("no finite values", (left + right) / 2, (top + bottom) / 2, 0.5, 0.5, 14, kInk);
  if (nonfinite > 0)
    c.text(detail::str(nonfinite, " non-finite value", nonfinite == 1 ? "" : "s", " not shown"),
           right, y0 + 30, 1, 0, 11, kTestColour);

  // Lines through the finite points (a non-finite value breaks the line), dots on the points
  // when there are few.
  cairo_t* cr = c.cr();
  cairo_save(cr);
  cairo_rectangle(cr, left, top - 4, right - left + 4, bottom - top + 8);
  cairo_clip(cr);
  for (const auto& s : series) {
    c.colour(s.colour);
    cairo_set_line_width(cr, 2);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    bool drawing = false;
    for (const auto& r : rows) {
      const double v = s.value(r);
      if (!std::isfinite(v)) {
        drawing = false;
        continue;
      }
      const double x = px(static_cast<double>(r.epoch)), y = py(std::clamp(v, ty.lo, ty.hi));
      drawing ? cairo_line_to(cr, x, y) : cairo_move_to(cr, x, y);
      drawing = true;
    }
    cairo_stroke(cr);
    if (rows.size() <= 40)
      for (const auto& r : rows)
        if (const double v = s.value(r); std::isfinite(v)) {
          cairo_arc(cr, px(static_cast<double>(r.epoch)), py(std::clamp(v, ty.lo, ty.hi)), 2.6, 0,
                    2 * M_PI);
          cairo_fill(cr);
        }
  }
  cairo_restore(cr);

  // The legend goes in the right-hand corner (upper or lower) the lines stay out of.
  const double lw = 96, lh = 48;
  int upper = 0, lower = 0;
  for (const auto& s : series)
    for (const auto& r : rows) {
      const double v = s.value(r);
      if (!std::isfinite(v) || px(static_cast<double>(r.epoch)) < right - lw - 20) continue;
      upper += py(v) < top + lh + 20;
      lower += py(v) > bottom - lh - 20;
    }
  const double lx = right - lw - 10, ly = upper <= lower ? top + 10 : bottom - lh - 10;
  cairo_rectangle(cr, lx, ly, lw, lh);
  cairo_set_source_rgba(cr, 1, 1, 1, 0.9);
  cairo_fill_preserve(cr);
  c.colour(kGrid);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  for (std::size_t i = 0; i < series.size(); ++i) {
    const double y = ly + 14 + 20 * static_cast<double>(i);
    c.line(lx + 10, y, lx + 36, y, series[i].colour, 2.5);
    c.text(series[i].name, lx + 44, y, 0, 0.5, 13, kInk);
  }
}

}  // namespace

bool plots_available() {
  return true;
}

std::string why_no_plots() {
  return {};
}

void write_curves(const std::string& file, const std::vector<EpochMetrics>& rows) {
  const Canvas canvas(1000, 420);
  panel(canvas, 0, 0, 500, 420, "Loss", "cross-entropy", rows,
        {{"train", kTrainColour, [](const EpochMetrics& r) { return r.train_loss; }},
         {"test", kTestColour, [](const EpochMetrics& r) { return r.test_loss; }}},
        std::nullopt);
  std::string accuracy_title = "Accuracy";
  if (!rows.empty() && std::isfinite(rows.back().test_accuracy))
    accuracy_title += detail::str(" (test ", tick_label(rows.back().test_accuracy, 4), ")");
  panel(canvas, 500, 0, 500, 420, accuracy_title, "accuracy", rows,
        {{"train", kTrainColour, [](const EpochMetrics& r) { return r.train_accuracy; }},
         {"test", kTestColour, [](const EpochMetrics& r) { return r.test_accuracy; }}},
        1.0);
  io::write_file_atomically(file, canvas.png());
}

}  // namespace flaxpp::cli

#else  // no cairo

namespace flaxpp::cli {

bool plots_available() {
  return false;
}

std::string why_no_plots() {
  return "this flaxpp was built without cairo: install libcairo2-dev (scripts/deps.sh does) "
         "and build again";
}

void write_curves(const std::string&, const std::vector<EpochMetrics>&) {}

}  // namespace flaxpp::cli

#endif
