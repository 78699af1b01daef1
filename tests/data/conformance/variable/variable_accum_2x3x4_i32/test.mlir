module {
  tosa.variable @acc = dense<[[[-129443688, 80944519, 514051626, -115703121], [96627844, -64976057, 112803293, -58294610], [148172700, 50629329, 189462006, 490447491]], [[-374963510, 66180085, -64087927, -152476220], [-279641067, -480756919, -104691656, 350211090], [-433035682, -100817248, 502326544, 484759530]]]> : tensor<2x3x4xi32>
  func.func @main(%arg0: tensor<2x3x4xi32> {tosa.tensor_name = "input-0"}) -> (tensor<2x3x4xi32> {tosa.tensor_name = "result-0"}, tensor<2x3x4xi32> {tosa.tensor_name = "result-1"}) {
    %v0 = tosa.variable_read @acc : tensor<2x3x4xi32>
    %v1 = tosa.add %v0, %arg0 : (tensor<2x3x4xi32>, tensor<2x3x4xi32>) -> tensor<2x3x4xi32>
    tosa.variable_write @acc, %v1 : tensor<2x3x4xi32>
    %v2 = tosa.variable_read @acc : tensor<2x3x4xi32>
    return %v0, %v2 : tensor<2x3x4xi32>, tensor<2x3x4xi32>
  }
}
