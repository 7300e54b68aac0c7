// The constants that move the softmax between e and 2, defined once (plain C++: the CPU models
// use them too). Taught in chapter 05 (exp2 with the scale folded in).
#pragma once

namespace fa::cuda {

constexpr float kLog2e = 1.4426950408889634f;  // log2(e): e^x = 2^(x log2(e))
constexpr double kLog2eD = 1.4426950408889634;
constexpr float kLn2 = 0.6931471805599453f;    // ln(2): log(x) = log2(x) ln(2)
constexpr double kLn2D = 0.6931471805599453;

}  // namespace fa::cuda
