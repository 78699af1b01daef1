module {
  tosa.variable @acc = dense<[[344916387, -395737513, 318975870, -409006520, -34429583], [339801874, -211492322, -170077023, -237913688, 235655100], [-263206777, 526627172, -58973868, -23462457, 4883655], [88629795, 57442344, 10143962, 532039378, 330351448]]> : tensor<4x5xi32>
  func.func @main(%arg0: tensor<4x5xi32> {tosa.tensor_name = "input-0"}) -> (tensor<4x5xi32> {tosa.tensor_name = "result-0"}, tensor<4x5xi32> {tosa.tensor_name = "result-1"}) {
    %v0 = tosa.variable_read @acc : tensor<4x5xi32>
    %v1 = tosa.add %v0, %arg0 : (tensor<4x5xi32>, tensor<4x5xi32>) -> tensor<4x5xi32>
    tosa.variable_write @acc, %v1 : tensor<4x5xi32>
    %v2 = tosa.variable_read @acc : tensor<4x5xi32>
    return %v0, %v2 : tensor<4x5xi32>, tensor<4x5xi32>
  }
}
